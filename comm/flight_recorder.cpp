#include "comm/flight_recorder.h"

#include <nlohmann/json.hpp>

namespace atl::comm {

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity), origin_(Clock::now()) {}

double FlightRecorder::now_s() const {
  return std::chrono::duration<double>(Clock::now() - origin_).count();
}

uint64_t FlightRecorder::start(const std::string& group, OpKind op, uint64_t bytes) {
  const double now = now_s();
  std::lock_guard<std::mutex> lock(mutex_);
  FlightRecord record;
  record.id = next_id_++;
  record.group = group;
  record.seq = ++progress_[group].issued;
  record.op = op;
  record.bytes = bytes;
  record.start_s = now;
  in_flight_.emplace(record.id, record);
  ring_.push_back(std::move(record));
  if (ring_.size() > capacity_) ring_.pop_front();
  return ring_.back().id;
}

void FlightRecorder::finish(uint64_t id) {
  const double now = now_s();
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return;
  ++progress_[it->second.group].completed;
  in_flight_.erase(it);
  // Ids in the ring are consecutive: the record, if still there, is at id - front's id.
  if (!ring_.empty() && id >= ring_.front().id && id - ring_.front().id < ring_.size())
    ring_[id - ring_.front().id].end_s = now;
}

std::optional<FlightRecord> FlightRecorder::oldest_in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_flight_.empty()) return std::nullopt;
  return in_flight_.begin()->second;
}

std::vector<FlightRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightRecord> out;
  const uint64_t first_in_ring = ring_.empty() ? next_id_ : ring_.front().id;
  for (const auto& [id, record] : in_flight_)
    if (id < first_in_ring) out.push_back(record);
  out.insert(out.end(), ring_.begin(), ring_.end());
  return out;
}

std::map<std::string, GroupProgress> FlightRecorder::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return progress_;
}

std::string FlightRecorder::to_json(int rank, const std::string& reason) const {
  const double now = now_s();
  nlohmann::ordered_json dump;
  dump["rank"] = rank;
  dump["reason"] = reason;
  dump["now_s"] = now;
  dump["groups"] = nlohmann::ordered_json::array();
  for (const auto& [group, p] : progress())
    dump["groups"].push_back({{"group", group}, {"issued", p.issued}, {"completed", p.completed}});
  dump["records"] = nlohmann::ordered_json::array();
  for (const FlightRecord& r : records())
    dump["records"].push_back({{"id", r.id},
                               {"group", r.group},
                               {"seq", r.seq},
                               {"op", op_name(r.op)},
                               {"bytes", r.bytes},
                               {"start_s", r.start_s},
                               {"state", r.in_flight() ? "in flight" : "completed"},
                               {"seconds", (r.in_flight() ? now : r.end_s) - r.start_s}});
  return dump.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace atl::comm
