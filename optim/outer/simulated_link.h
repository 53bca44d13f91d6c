// A link simulator for island experiments on one machine: an exchange over a link of B Mbit/s and L
// ms latency per message takes messages*L + 8*bytes/B. The exchange holds its result back until
// that time has passed since it began (real communication inside it counts towards the time), so
// wall-clock comparisons of low-bandwidth training can be made where every rank shares one host.
#pragma once

#include <chrono>
#include <cstdint>

namespace atl::optim::outer {

struct SimulatedLink {
  double bandwidth_mbps = 0.0;  // 0: no simulation
  double latency_ms = 0.0;

  bool enabled() const { return bandwidth_mbps > 0.0 || latency_ms > 0.0; }
  // Seconds a transfer of `bytes` in `messages` sequential messages takes on this link.
  double seconds(uint64_t bytes, int messages) const;
  // Sleeps until seconds(bytes, messages) have passed since `start`; returns the simulated seconds.
  double hold_until_delivered(std::chrono::steady_clock::time_point start, uint64_t bytes,
                              int messages) const;
};

}  // namespace atl::optim::outer
