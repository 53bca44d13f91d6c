// The flight recorder (DESIGN §3): every collective and point-to-point operation of the recorded
// groups, with its per-group sequence number, kind, bytes and start/end time, in a bounded ring. The
// watchdog reads the oldest operation still in flight; on a hang each rank dumps its ring, and the
// per-group counts of issued and completed operations tell which rank is behind.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace atl::comm {

struct FlightRecord {
  uint64_t id = 0;    // recorder-wide, in issue order
  std::string group;  // the group's name and members' world ranks, e.g. "dp[0,2]"
  uint64_t seq = 0;   // 1-based: the seq-th operation this rank issued on `group`
  OpKind op = OpKind::kAllReduce;
  uint64_t bytes = 0;    // the tensor's bytes (not the wire bytes)
  double start_s = 0.0;  // seconds since the recorder was created
  double end_s = -1.0;   // < 0: still in flight
  bool in_flight() const { return end_s < 0.0; }
};

// Per group: how far this rank got. Ranks of one group that agree have equal counts.
struct GroupProgress {
  uint64_t issued = 0;
  uint64_t completed = 0;
};

class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  explicit FlightRecorder(size_t capacity);

  // Records the start of an operation; returns its id for finish().
  uint64_t start(const std::string& group, OpKind op, uint64_t bytes);
  void finish(uint64_t id);

  // The oldest operation still in flight, if any.
  std::optional<FlightRecord> oldest_in_flight() const;
  // The last `capacity` operations plus any older one still in flight, in issue order.
  std::vector<FlightRecord> records() const;
  std::map<std::string, GroupProgress> progress() const;
  double now_s() const;

  // The dump written to <run dir>/flight/rank-N.json: progress per group and the records.
  std::string to_json(int rank, const std::string& reason) const;

 private:
  const size_t capacity_;
  const Clock::time_point origin_;
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::deque<FlightRecord> ring_;               // the newest `capacity_` records
  std::map<uint64_t, FlightRecord> in_flight_;  // every operation not yet finished
  std::map<std::string, GroupProgress> progress_;
};

}  // namespace atl::comm
