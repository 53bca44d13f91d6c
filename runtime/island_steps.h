// What the trainer does with islands between and around its inner steps: the outer optimizer's
// syncs after each step, the rounds of islands with a membership per round (met again while a
// round's exchange fails), catching up with the others after a resume, and islands that average
// their gradients every step. The rounds' protocol itself is island_rounds.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "runtime/metrics/run_log.h"
#include "runtime/parallelize.h"

namespace atl::runtime {

class IslandSteps {
 public:
  // `layout` and `log` outlive this.
  IslandSteps(ParallelLayout& layout, RunLog& log) : layout_(layout), log_(log) {}

  // After inner step `step`: the outer optimizer's syncs. Islands with a membership per round meet
  // at each round's boundary first. Returns the round's member count (0: no round ended here).
  int after_inner_step(int64_t step);

  // Islands with a membership per round, after resuming at `step`: when the others are past this
  // island's phi, meets their next round before training and takes their state. Returns the round's
  // step to continue at, or nothing when there was nothing to catch up with.
  std::optional<int64_t> catch_up(int64_t step);

  // The dp-averaged gradients of what this rank owns, averaged with the same pieces in every other
  // island (islands averaging every step); returns the seconds it blocked.
  double average_gradients();

  // Islands with an outer optimizer: `evaluate` run on the outer parameters phi (what the islands
  // agree on) instead of this island's theta, which is put back afterwards.
  double on_phi(const std::function<double()>& evaluate);
  // Validation's islands record, this island's theta having scored `val_loss`: every island's
  // theta (with a membership per round, whose last group may have lost a member since, this
  // island's alone) and phi through `evaluate`. Nothing without an outer optimizer.
  std::optional<IslandValidation> validation(double val_loss, const std::function<double()>& evaluate);

 private:
  // The outer optimizer's syncs due after `step`, and the islands they left out for their norm.
  void outer_syncs(int64_t step);
  // Round `round` among the islands that come, met again among those still there while its exchange
  // fails (a member died mid-round). Returns its member count (0: this island came too late and sits
  // it out, to catch up at the next one).
  int outer_round(int64_t round);
  // Meets round `round` from attempt `attempt` on and runs `exchange` among its members (true: the
  // round counted now; false: it counts once its exchange ends, at the next boundary), met again
  // among those still there while it throws RoundFailed. Returns the round's member count (0: sat out).
  int meet_until_counted(int64_t round, int attempt, const std::function<bool()>& exchange);
  // Delayed DiLoCo: the exchange of round `round`, running on that round's group since its boundary,
  // ends before the next round's group replaces it; when it failed (a member died mid-exchange), the
  // round is met again among those left and the exchange rerun there.
  void settle_in_flight(int64_t round);

  ParallelLayout& layout_;
  RunLog& log_;
};

}  // namespace atl::runtime
