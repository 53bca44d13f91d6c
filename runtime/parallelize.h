// The parallelize step: from a config and the launched ranks to everything one rank trains with,
// the parallelisms applied in order -- the mesh, the pipeline stage's model chunks, their tensor-
// parallel parameters in flat buffers, sharded data parallelism (ZeRO 0-3), the schedule, the inner
// optimizer and, for islands, the outer exchange and optimizer.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "comm/island_lease.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/outer/canonical_average.h"
#include "optim/outer/island_exchange.h"
#include "optim/outer/outer_optimizer.h"
#include "parallel/flat_parameters.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/sharded_data_parallel.h"
#include "runtime/config/config.h"
#include "runtime/island_rounds.h"
#include "runtime/model/fp8_linear.h"
#include "runtime/model/llama.h"

namespace atl::comm {
class FlightRecorder;
class MpiCommunicator;
}  // namespace atl::comm

namespace atl::runtime {

// The gradient and optimizer kernel levers (kernels.*) as this run applies them: auto resolved for
// the device, and each lever off where what it builds on is off.
struct KernelLevers {
  bool fused_adamw = false;
  bool fused_clip = false;         // with fused_adamw only
  bool first_grad_copy = false;    // ZeRO 0-1 only
  bool fused_weight_grad = false;  // with first_grad_copy only
};

// The levers for `device` (the CPU or a GPU; nothing is asked of the device itself but, under
// train.precision fp8, a GPU's compute capability). Throws ConfigError, one line each, where an
// explicit true cannot apply because the lever it builds on is auto and auto is off on the CPU
// (kernels.fused_clip with fused_adamw, kernels.fused_weight_grad with first_grad_copy), where one
// of the model's CUDA kernels (kernels.fused_swiglu, fused_rope, fused_cross_entropy) is true on the
// CPU, and where
// train.precision fp8 cannot run on `device` (the CPU, or a GPU below compute capability 9.0: no FP8
// tensor cores for cuBLASLt). What the config alone rules out (the partner false, parallel.zero >= 2,
// fused_weight_grad under fp8) validate_layout reports; auto is never refused (fused_weight_grad's
// is off under fp8). `fp8_emulation` (the tests' hook, test_hooks.h) lets fp8 run on the CPU.
KernelLevers resolve_kernels(const Config& config, c10::Device device, bool fp8_emulation = false);

// The start-up line of what those levers resolved to, e.g. "kernels: fused_adamw on (auto),
// fused_clip on (auto), first_grad_copy off (auto: parallel.zero = 2), fused_weight_grad off (auto:
// without first_grad_copy)": an auto lever says so, and why where what it builds on kept it off.
std::string kernels_line(const Config& config, const KernelLevers& levers);

// One rank's parallel layout. Members are declared in the order they depend on each other, so that
// each is destroyed before what it refers to.
struct ParallelLayout {
  at::ScalarType compute_dtype = at::kFloat;         // of parameters and activations (train.precision)
  c10::Device device = c10::kCPU;                    // where this rank's tensors live (run.device)
  KernelLevers kernels;                              // the gradient and optimizer levers applied
  std::unique_ptr<comm::DeviceMesh> mesh;            // islands x pp x dp x tp groups
  parallel::pipeline::PipelineShape pipeline;        // this rank's stage, microbatches, virtual stages
  std::unique_ptr<parallel::FlatParameters> params;  // this rank's tp shard of its chunks' parameters
  std::unique_ptr<parallel::ShardedDataParallel> data_parallel;  // ZeRO 0-3 over the dp group
  std::unique_ptr<Fp8Linears> fp8;  // train.precision fp8: the chunks' FP8 linear layers and weight cache
  std::vector<std::unique_ptr<LlamaModel>> chunks;   // the model chunks this rank runs, in order
  std::vector<parallel::pipeline::PipeOp> schedule;  // one training step's pipeline schedule
  std::unique_ptr<parallel::pipeline::PipelineExecutor> executor;
  std::unique_ptr<optim::FlatAdamW> optimizer;  // on what this rank owns
  optim::LrSchedule lr_schedule;
  std::unique_ptr<optim::outer::IslandExchange> island_exchange;  // islands > 1
  // Islands meeting canonically: every rank of this island, rank by rank every rank of every
  // island, and the average (rank by rank, or through the island's rank 0).
  std::unique_ptr<comm::Communicator> island_ranks;
  std::unique_ptr<comm::Communicator> every_island_rank;
  std::unique_ptr<optim::outer::IslandAverage> canonical_average;
  std::unique_ptr<comm::IslandLease> island_lease;      // islands as jobs: this job's island id (rank 0)
  std::unique_ptr<IslandRounds> rounds;                 // islands as jobs with a membership per round
  std::unique_ptr<optim::outer::OuterOptimizer> outer;  // outer.algorithm != none

  // Islands averaging gradients every step (islands > 1, outer.algorithm none): synchronous data
  // parallelism across islands.
  bool islands_average_every_step() const { return island_exchange && !outer; }
  // The global gradient norm over what this rank owns (DESIGN §5): each parameter once in the model
  // group (tp-replicated ones on tp rank 0, stage copies never), and under ZeRO over the dp group.
  // Collective over those groups.
  double global_grad_norm() const;
  // What such a norm sums: the spans of this rank's optimizer values that count, and the groups
  // over which the sum of squares is all-reduced.
  std::vector<parallel::ShardSpan> norm_spans() const;
  std::vector<comm::Communicator*> norm_groups() const;
  // Bytes of model state this rank holds now (live allocations).
  parallel::ModelStateBytes model_state_bytes() const;
};

// Builds the layout over `world` (collective) with this rank's tensors on `device` (already bound);
// every group's operations are recorded in `flight`. Parameters start from model.init_std with
// run.seed, or from `initial_weights` (canonical names, model.init_from) when it is not empty.
// `fp8_emulation`: as for resolve_kernels.
ParallelLayout parallelize(const Config& config, c10::Device device, const comm::MpiCommunicator& world,
                           comm::FlightRecorder* flight,
                           const std::map<std::string, at::Tensor>& initial_weights,
                           bool fp8_emulation = false);

at::ScalarType scalar_type(Precision precision);
at::ScalarType scalar_type(ReduceDtype dtype);

}  // namespace atl::runtime
