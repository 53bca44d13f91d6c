// When the outer optimizers synchronise, and with whom (DESIGN §6) -- pure functions of the step,
// the same on every rank without a message.
//
// Every step count is "optimizer steps completed". DiLoCo syncs the whole model after steps H, 2H,
// ... Streaming DiLoCo splits the layers into P fragments (layer l in fragment l mod P) and starts
// fragment p's exchange after the steps t with t mod H = (p+1)*H/P mod H: with H = 12 and P = 4,
// fragments 0, 1, 2, 3 sync after steps 3, 6, 9, 12, then 15, 18, ... Its result is applied `delay`
// steps later (tau < H/P, so at most one exchange is ever in flight). One-step-delayed DiLoCo
// applies round r's result at the end of round r+1.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace atl::optim::outer {

struct SyncSchedule {
  int inner_steps = 50;  // H
  int fragments = 1;     // P (divides H)
  int delay = 0;         // steps between an exchange's start and the use of its result
};

// The fragment whose exchange starts after `step` steps, if any.
std::optional<int> fragment_starting_after(const SyncSchedule& schedule, int64_t step);

// An exchange started and not yet applied after `step` steps: its fragment and the step after which
// its result is applied.
struct InFlight {
  int fragment;
  int64_t started_after;
  int64_t applied_after;
};
std::optional<InFlight> in_flight_after(const SyncSchedule& schedule, int64_t step);

// NoLoCo's gossip groups for outer step `round`: a permutation of the islands drawn from
// (seed, round), cut into groups of `group_size`; the last group also takes the remainder. Every
// island is in exactly one group.
std::vector<std::vector<int>> gossip_groups(int islands, int group_size, uint64_t seed, int64_t round);

}  // namespace atl::optim::outer
