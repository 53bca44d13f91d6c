// What one rank tells rank 0 when the watchdog fires, and rank 0's diagnosis of all of them: which
// operation is stuck, on which group, and which rank is behind (it issued fewer operations on that
// group) and where that rank is instead.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/flight_recorder.h"

namespace atl::comm {

struct RankFlightSummary {
  int rank = -1;
  bool answered = false;  // false: rank 0 heard nothing from it before its deadline
  std::map<std::string, GroupProgress> groups;
  std::optional<FlightRecord> waiting;  // its oldest operation in flight
  double waiting_s = 0.0;               // for how long
};

RankFlightSummary summarize(int rank, const FlightRecorder& recorder);
// A text form for the wire (tab-separated lines), and back. A message with a field that does not read
// decodes as a rank that did not answer (never an exception: rank 0 is diagnosing a hang).
std::string encode(const RankFlightSummary& summary);
RankFlightSummary decode(const std::string& text);

// Lines for rank 0 to print: the stuck operation, then each rank that is behind or silent.
std::vector<std::string> diagnose_hang(const std::vector<RankFlightSummary>& ranks, double timeout_s);

// The world ranks of a flight-record group label, "dp[0,2]" -> {0, 2}; none for a malformed label.
std::vector<int> members_of(const std::string& label);

}  // namespace atl::comm
