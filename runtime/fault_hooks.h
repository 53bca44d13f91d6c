// Test hooks for the failure tests, from the environment variable ATOLL_FAULT (a comma-separated
// list; unset in real runs; read by the launcher, test_hooks.h):
//   nan_gradient@STEP[:RANK]     rank RANK (default 0) writes NaN into its gradients in step STEP
//   skip_collective@RANK:STEP    rank RANK stops before the first collective of step STEP and never
//                                issues it, as a rank stuck in computation would (the watchdog's case)
//   corrupt_chunk@EXCHANGE:ISLAND  island ISLAND flips a byte of the first chunk it sends in its
//                                EXCHANGE-th outer exchange, after tagging it (the job secret's HMAC
//                                catches it; IslandExchange::corrupt_in_flight)
//   sigkill@STEP                 every rank of this job kills itself (SIGKILL) at the start of step
//                                STEP, as a machine that loses power (the elastic islands' case);
//                                only a run that started from step 0 (a relaunch resumes and lives)
//   sigkill_in_exchange@EXCHANGE every rank of this job dies (SIGKILL) in its EXCHANGE-th outer
//                                exchange, its first phase sent (IslandExchange::die_in_exchange)
//   ignore_sigterm               every rank ignores SIGTERM once it has started (no preemption by
//                                it), as a rank stuck where no signal handler runs; the `atoll train`
//                                command applies it (the launcher's end of a job must SIGKILL it)
// Steps are 1-based, as in the progress lines.
#pragma once

#include <cstdint>
#include <string>

namespace atl::runtime {

struct FaultHooks {
  int64_t nan_gradient_step = -1;
  int nan_gradient_rank = 0;
  int64_t skip_collective_step = -1;
  int skip_collective_rank = -1;
  int64_t corrupt_chunk_exchange = -1;
  int corrupt_chunk_island = -1;
  int64_t sigkill_step = -1;
  int64_t sigkill_exchange = -1;
  bool ignore_sigterm = false;

  // Parses ATOLL_FAULT's value; throws std::invalid_argument naming a malformed entry.
  static FaultHooks parse(const std::string& text);

  bool nan_gradient(int64_t step, int rank) const {
    return step == nan_gradient_step && rank == nan_gradient_rank;
  }
  bool skip_collective(int64_t step, int rank) const {
    return step == skip_collective_step && rank == skip_collective_rank;
  }
  // Whether `rank` of `world_size` poisons its loss in `step`: nan_gradient's rank, or where it
  // names none (-1) the last rank, which is on a last stage where the loss is.
  bool poisons_loss(int64_t step, int rank, int world_size) const {
    const int hooked = nan_gradient_rank >= 0 ? nan_gradient_rank : world_size - 1;
    return nan_gradient(step, hooked) && rank == hooked;
  }
  // At the start of step `step` on `rank`: skip_collective stops here and never issues a collective
  // again (until the watchdog ends the job), sigkill dies as a machine that loses power.
  void act_before_step(int64_t step, int rank) const;
};

}  // namespace atl::runtime
