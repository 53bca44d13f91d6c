#include "runtime/test_hooks.h"

#include <charconv>
#include <stdexcept>

namespace atl::runtime {

TestHooks TestHooks::parse(const LaunchEnvironment& environment) {
  TestHooks hooks;
  hooks.faults = FaultHooks::parse(environment.fault);
  hooks.checkpoint_fault = checkpoint::parse_fault_point(environment.checkpoint_fault);
  const std::string& delay = environment.checkpoint_copy_delay_ms;
  if (!delay.empty()) {
    int ms = 0;
    const auto [end, error] = std::from_chars(delay.data(), delay.data() + delay.size(), ms);
    if (error != std::errc() || end != delay.data() + delay.size() || ms < 0)
      throw std::invalid_argument("ATOLL_CHECKPOINT_COPY_DELAY_MS = '" + delay +
                                  "' is not a whole number of milliseconds; unset it or write e.g. 10");
    hooks.checkpoint_copy_delay = std::chrono::milliseconds(ms);
  }
  const std::string& fp8 = environment.fp8_emulation;
  if (!fp8.empty() && fp8 != "1")
    throw std::invalid_argument("ATOLL_FP8_EMULATION = '" + fp8 + "' is not 1; unset it or write 1");
  hooks.fp8_emulation = fp8 == "1";
  return hooks;
}

}  // namespace atl::runtime
