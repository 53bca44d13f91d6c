// Fault injection for checkpoint tests: a fault point PHASE:STEP[:RANK] (ATOLL_CHECKPOINT_FAULT, read
// by the launcher and handed to the store) makes rank RANK
// (default 0) exit at once, as if killed, when the save of step STEP reaches PHASE:
//   copy      taking the snapshot (async modes; sync: the start of the save)
//   write     after its shard is written, before the ranks agree
//   manifest  rank 0, before the manifest is written
//   latest    rank 0, after step-N/ is committed, before LATEST names it
// Unset (the normal case) it costs nothing.
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

// The fault `text` (ATOLL_CHECKPOINT_FAULT's value) asks for; none when empty; std::invalid_argument
// naming the variable when it is malformed.
std::optional<FaultPoint> parse_fault_point(const std::string& text);

// Exits the process (status 86, after one line on stderr) if `fault` is this phase, step and rank.
void die_if_fault(const std::optional<FaultPoint>& fault, const char* phase, int64_t step, int rank);

}  // namespace atl::checkpoint
