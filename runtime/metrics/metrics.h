// Run observability (DESIGN §10): what a step measured and the metrics.jsonl records, one JSON
// object per line, losses exact (round-trip).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/metrics/device_memory.h"

#include <nlohmann/json.hpp>

namespace atl::runtime {

struct StepMetrics {
  int64_t step = 0;  // optimizer steps completed, 1-based
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  bool nonfinite = false;  // the loss or gradient norm was NaN/Inf
  bool skipped = false;    // ... and the update was skipped (train.on_nonfinite = skip)
  double tokens_per_s = 0.0;
  double mfu = 0.0;  // fraction of the measured matrix-product peak
  double step_seconds = 0.0;
  double comm_wait_seconds = 0.0;        // time blocked on communication in the step (not overlapped)
  double checkpoint_wait_seconds = 0.0;  // time blocked on a lazy checkpoint's snapshot before the update
  uint64_t comm_bytes = 0;  // bytes this rank sent in the step inside its island (tp, dp, pp, cp)
  uint64_t tp_bytes = 0, dp_bytes = 0, pp_bytes = 0;  // of which in the tp, dp and pp groups
  // Context parallelism (cp > 1): the bytes ring attention sent in the step (K/V, and dK/dV in
  // backward) and the seconds this rank blocked waiting for them -- the exposed K/V wait, the part
  // of comm_wait_seconds the ring did not hide behind its blocks' compute.
  bool context_parallel = false;
  uint64_t cp_bytes = 0;
  double kv_wait_seconds = 0.0;
  // Islands: bytes this rank sent to other islands in the step and since the start, the seconds the
  // step blocked on the outer exchange, and the link simulator's total seconds (0 without islands).
  bool islands = false;
  uint64_t outer_bytes = 0, outer_bytes_total = 0;
  double outer_wait_seconds = 0.0, outer_simulated_seconds = 0.0;
  int outer_islands = 0;   // islands as jobs with a membership per round: the members of the round
                           // that ended at this step (0: none ended)
  uint64_t rss_bytes = 0;  // resident memory of this process
  // On a GPU: the caching allocator's bytes held by tensors, reserved, and the peak held.
  std::optional<DeviceMemory> gpu_memory;
  // This rank's model state as allocated after the step (its tensor-parallel shard, divided by
  // dp as the ZeRO stage shards it): parameters, gradients, optimizer moments.
  uint64_t param_bytes = 0, grad_bytes = 0, optimizer_bytes = 0;
  // The most bytes of tensors this rank's forward and backward held on its device at once, above
  // what it held when they began (allocation_peak.h): activations, their gradients, recomputation.
  uint64_t activation_bytes = 0;
  // Per pipeline stage (index = stage; empty without a pipeline): the idle fraction of the step's
  // schedule (waiting over wall time: the bubble) and activation_bytes, of this rank's pipeline.
  std::vector<double> stage_idle;
  std::vector<double> stage_activation_bytes;
};

// A JSON object written field by field, in the order added (nlohmann-json); doubles are written as
// the shortest text that reads back as the same double, so losses are exact.
class JsonRecord {
 public:
  JsonRecord& add(const std::string& key, double value);
  JsonRecord& add(const std::string& key, int64_t value);
  JsonRecord& add(const std::string& key, const std::string& value);
  JsonRecord& add(const std::string& key, const std::vector<double>& values);
  // The object on one line.
  std::string str() const;

 private:
  nlohmann::ordered_json fields_ = nlohmann::ordered_json::object();
};

class MetricsLog {
 public:
  // Appends to `path`; an empty path disables the log (ranks other than 0).
  explicit MetricsLog(const std::string& path);
  void write(const JsonRecord& record);

 private:
  std::ofstream out_;
};

JsonRecord to_json(const StepMetrics& m);
std::string format_bytes(double bytes);
uint64_t resident_memory_bytes();

}  // namespace atl::runtime
