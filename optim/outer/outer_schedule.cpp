#include "optim/outer/outer_schedule.h"

#include <numeric>
#include <random>

namespace atl::optim::outer {

std::optional<int> fragment_starting_after(const SyncSchedule& s, int64_t step) {
  if (step <= 0) return std::nullopt;
  const int64_t period = s.inner_steps / s.fragments;
  if (step % period != 0) return std::nullopt;
  // Fragment p starts at (p+1)*period modulo H: step/period - 1 modulo P.
  return static_cast<int>((step / period - 1) % s.fragments);
}

std::optional<InFlight> in_flight_after(const SyncSchedule& s, int64_t step) {
  if (s.delay == 0 || step <= 0) return std::nullopt;
  const int64_t period = s.inner_steps / s.fragments;
  const int64_t last_start = step / period * period;  // the latest start at or before `step`
  if (last_start == 0 || last_start + s.delay <= step) return std::nullopt;
  return InFlight{*fragment_starting_after(s, last_start), last_start, last_start + s.delay};
}

std::vector<std::vector<int>> gossip_groups(int islands, int group_size, uint64_t seed, int64_t round) {
  std::vector<int> order(static_cast<size_t>(islands));
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates with mt19937_64, whose output the standard fixes, so every rank draws the same
  // permutation (std::shuffle's algorithm is left to the implementation).
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(round));
  for (int i = islands - 1; i > 0; --i) {
    const int j = static_cast<int>(random() % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  const int groups = std::max(1, islands / group_size);
  std::vector<std::vector<int>> out(static_cast<size_t>(groups));
  for (int i = 0; i < islands; ++i)
    out[static_cast<size_t>(std::min(i / group_size, groups - 1))].push_back(order[static_cast<size_t>(i)]);
  return out;
}

}  // namespace atl::optim::outer
