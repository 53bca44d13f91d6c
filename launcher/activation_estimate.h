// `atoll plan`'s activation estimate: the bytes a rank's forward keeps for its backward, counted
// tensor by tensor from what Atoll's Llama layer saves (runtime/model/llama.cpp) for each
// train.recompute mode, and the forward FLOPs recomputation adds. tests/mpi/test_recompute.cpp
// holds the estimate to AllocationPeak's measurement.
#pragma once

#include <cstdint>

#include "runtime/config/config.h"

namespace atl::launcher {

struct LayerActivations {
  double kept = 0;   // bytes one decoder layer keeps for one microbatch until its backward
  double rerun = 0;  // bytes its backward adds while it reruns the layer (0 without recomputation)
  // Gradients alive at once inside the layer's backward: the hidden state's and two of the MLP
  // width (the product's gradient splits into silu(gate)'s and up's).
  double gradients = 0;
};

// One decoder layer of `config` on one rank (its tensor-, sequence- and context-parallel share) for
// a microbatch of `microbatch` sequences, under config.train.recompute. On run.device: cuda the
// fused kernels a GPU uses (attention, and RMSNorm and grouped-query attention where
// config.kernels has them); otherwise the CPU's choice of attention kernel; at cp > 1 ring
// attention's (parallel/context_parallel_attention.h).
LayerActivations layer_activations(const runtime::Config& config, int64_t microbatch);

// The last stage's head for one microbatch: the final norm's saved tensors, the fp32 logits' log
// softmax and, at the start of backward, its gradient (with the fused loss on a GPU: the logits in
// the compute dtype, a float per token, and their gradient in that dtype).
double head_activation_bytes(const runtime::Config& config, int64_t microbatch, int64_t vocab_rows);

// Forward FLOPs per token the recomputation reruns (full: the whole layer's; selective: a
// hand-written attention's two products, none around the fused kernel; pointwise work not counted).
double recompute_flops_per_token(const runtime::Config& config);

}  // namespace atl::launcher
