// Fault injection for checkpoint tests: ATOLL_CHECKPOINT_FAULT=PHASE:STEP[:RANK] makes rank RANK
// (default 0) exit at once, as if killed, when the save of step STEP reaches PHASE:
//   copy      taking the snapshot (async modes; sync: the start of the save)
//   write     after its shard is written, before the ranks agree
//   manifest  rank 0, before the manifest is written
//   latest    rank 0, after step-N/ is committed, before LATEST names it
// Read once when a checkpoint store is made; unset (the normal case) it costs nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace atl::checkpoint {

struct FaultPoint {
  std::string phase;
  int64_t step = 0;
  int rank = 0;
};

// The fault ATOLL_CHECKPOINT_FAULT asks for, if any; std::invalid_argument naming the variable when
// it is malformed.
std::optional<FaultPoint> fault_from_environment();

// Exits the process (status 86, after one line on stderr) if `fault` is this phase, step and rank.
void die_if_fault(const std::optional<FaultPoint>& fault, const char* phase, int64_t step, int rank);

}  // namespace atl::checkpoint
