// What `atoll train` takes from its process environment, read once at start-up by the launcher
// (launcher/train_command.cpp) and handed to the trainer: the runtime's libraries read no
// environment variables themselves.
#pragma once

#include <string>

#include "runtime/placement.h"

namespace atl::runtime {

struct LaunchEnvironment {
  // ATOLL_PROGRESS=bar: a progress bar on rank 0's console. `atoll launch` sets it when its own output
  // is a terminal; a rank cannot tell (Open MPI gives it a pseudo-terminal even under `| tee log`).
  bool progress_bar = false;
  // `atoll train --verbose` (`atoll launch --verbose` passes it on): the resolved config's table and
  // the rank table on rank 0's console, besides run.dir/config.txt and ranks.txt.
  bool verbose = false;
  RankPlacement placement;  // where this rank sits on its node, and its GPU variables
  // The failure tests' hooks as written (empty in real runs), parsed by the trainer's start-up checks
  // so that a malformed one is reported like any other bad input (test_hooks.h).
  std::string fault;                     // ATOLL_FAULT
  std::string checkpoint_fault;          // ATOLL_CHECKPOINT_FAULT
  std::string checkpoint_copy_delay_ms;  // ATOLL_CHECKPOINT_COPY_DELAY_MS
  std::string fp8_emulation;             // ATOLL_FP8_EMULATION
};

}  // namespace atl::runtime
