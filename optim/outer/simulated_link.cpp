#include "optim/outer/simulated_link.h"

#include <thread>

namespace atl::optim::outer {

double SimulatedLink::seconds(uint64_t bytes, int messages) const {
  const double transfer =
      bandwidth_mbps > 0.0 ? 8.0 * static_cast<double>(bytes) / (bandwidth_mbps * 1e6) : 0.0;
  return transfer + 1e-3 * latency_ms * messages;
}

double SimulatedLink::hold_until_delivered(std::chrono::steady_clock::time_point start, uint64_t bytes,
                                           int messages) const {
  if (!enabled()) return 0.0;
  const double simulated = seconds(bytes, messages);
  std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(simulated)));
  return simulated;
}

}  // namespace atl::optim::outer
