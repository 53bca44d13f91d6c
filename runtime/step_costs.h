// What a training step cost beyond its loss, for its StepMetrics: wall time, throughput and MFU,
// bytes sent per group inside the island and to other islands, time blocked, memory, and per
// pipeline stage the bubble and activation memory.
#pragma once

#include <chrono>
#include <cstdint>

#include "parallel/pipeline/executor.h"
#include "runtime/config/config.h"
#include "runtime/device.h"
#include "runtime/metrics/metrics.h"
#include "runtime/parallelize.h"
#include "runtime/placement.h"

namespace atl::runtime {

// The matmul peak per rank that MFU is measured against: a matmul of the compute dtype, timed on
// every rank at once (as they will compute at once) and averaged over dp. Ranks sharing a GPU (more
// on the node than GPUs) would each measure a fraction of it: one rank per GPU measures alone, and
// every rank takes the largest peak (over `world`). Collective.
double agreed_peak_flops(const ParallelLayout& layout, const DeviceChoice& device,
                         const RankPlacement& placement, comm::Communicator& world);

class StepCostMeter {
 public:
  // At the start of a step: starts its clock and reads the counters inside the island.
  explicit StepCostMeter(const ParallelLayout& layout);
  // Reads the outer exchange's counters; call after the pipeline has run, before islands exchange.
  void before_outer_exchange();
  // After the update: the step's costs into `m`. Collective over the pp group (stage statistics).
  void finish(StepMetrics& m, const Config& config, double peak_flops_per_rank,
              const parallel::pipeline::PipelineRunStats& pipeline_stats, double checkpoint_wait_seconds,
              double island_average_seconds) const;

  // Bytes sent and seconds blocked waiting, over the groups inside an island.
  struct CommTotals {
    uint64_t bytes = 0;
    uint64_t tp = 0, dp = 0, pp = 0, cp = 0;  // the main groups' shares of `bytes`
    double wait_seconds = 0.0;
    double cp_wait_seconds = 0.0;  // the cp group's share of `wait_seconds`: the ring's K/V
  };

 private:
  const ParallelLayout& layout_;
  std::chrono::steady_clock::time_point start_;
  CommTotals comm_before_;
  uint64_t outer_bytes_before_ = 0;
  double outer_wait_before_ = 0.0;
};

}  // namespace atl::runtime
