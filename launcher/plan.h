// `atoll plan`: what a layout costs before anything runs -- per pipeline stage (tensor- and
// data-parallel ranks of a stage are alike) the bytes of parameters, gradients and optimizer state
// a rank holds under the configured ZeRO stage, an activation estimate, and the bytes each group
// sends per step. Pure arithmetic over the config, so it answers for layouts far larger than this
// machine (a 7B model on 64 GPUs) as readily as for the one about to run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/config.h"

namespace atl::launcher {

struct StagePlan {
  int stage = 0;
  int64_t parameters = 0;  // elements one rank of this stage holds (its tensor-parallel shard)
  // Model state per rank as built: parameters in the compute dtype (4 B, or 2 B in bf16), 4 B fp32
  // gradients, 8 B AdamW moments (+ 4 B fp32 master weights in bf16) per parameter, divided by
  // dp x cp as the ZeRO stage shards them (ZeRO-1 also holds its reduced 4/dp B gradient piece beside the
  // full gradient buffer).
  double parameter_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  // Activations at the schedule's peak: what each layer keeps for backward under train.recompute,
  // times the layers and microbatches alive, plus one layer's rerun and the head
  // (activation_estimate.h).
  double activation_bytes = 0;
  // train.precision fp8: the weight cache's FP8 W and W^T of each decoder linear weight (a byte
  // each per element): every layer of the stage, or under ZeRO-3 the two units gathered at a time
  // (the one computing and the one prefetched). 0 otherwise.
  double fp8_cache_bytes = 0;
  // Bytes one rank sends per step (ring costs: all-reduce 2(n-1)/n, reduce-scatter and
  // all-gather (n-1)/n of the buffer).
  double dp_bytes = 0, tp_bytes = 0, pp_bytes = 0, embedding_bytes = 0;
  // Context parallelism: ring attention's K/V and their gradients around the cp group.
  double cp_bytes = 0;
  // Islands: the outer optimizer's phi and momentum (fp32, over what this rank's optimizer owns),
  // and the bytes one rank sends to other islands per sync and per step on average (outer.algorithm
  // none: gradients every step).
  double outer_state_bytes = 0, outer_bytes_per_sync = 0, outer_bytes_per_step = 0;
  double model_state_bytes() const { return parameter_bytes + gradient_bytes + optimizer_bytes; }
};

struct Plan {
  int world_size = 0;
  std::vector<StagePlan> stages;
};

// std::invalid_argument (one line per problem) when the layout is not valid for its own rank count.
Plan make_plan(const runtime::Config& config);
// The plan as tables, with DeepSpeed's headline (bytes of model state per parameter per rank in
// mixed precision) for the configured dp.
std::string format_plan(const runtime::Config& config, const Plan& plan);

// Against `device_bytes` of memory per rank (atoll plan --memory): whether the fullest rank fits it
// (model state, activations, the fp8 weight cache) and, where it does not, the smallest cp (doubling
// parallel.cp while the layout stays valid: the sequence still splits into its chunks) at which it
// would; otherwise what else to turn. One or two lines.
std::string format_fit(const runtime::Config& config, const Plan& plan, double device_bytes);

// DeepSpeed's mixed-precision model state per parameter per rank: 2 B parameters, 2 B gradients,
// 12 B fp32 master weights and Adam moments; ZeRO 1 shards the 12, ZeRO 2 also the gradients,
// ZeRO 3 everything over `dp` ranks (DDP 16, Z1 4 + 12/N, Z2 2 + 14/N, Z3 16/N).
double mixed_precision_state_bytes_per_parameter(int zero_stage, int dp);

}  // namespace atl::launcher
