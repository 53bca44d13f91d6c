// Activation recomputation (train.recompute): a region of a decoder layer's forward that keeps only
// its inputs -- and, for selective recomputation, its linear layers' outputs -- and runs again,
// under autograd, when backward reaches it (Megatron-LM's and TorchTitan's full and selective modes).
//
// The rerun happens inside the region's backward (a reentrant autograd call, as PyTorch's
// checkpoint(use_reentrant=True)): it issues the same operations, collectives included, in the same
// order on every rank, and the gradients of the region's parameters leave the region's node like
// any other gradient, so hooks (ZeRO's gradient buckets) see them land exactly as without it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "parallel/weight_gradient_sink.h"

namespace atl::runtime {

class Fp8Linears;  // fp8_linear.h

// What a region's rerun needs of a linear layer's product: its value (read by the ops after it,
// whose backward needs it: a norm, the SwiGLU product, the attention kernel), or only its place in
// the graph (the product leaves the region, or goes only through ops whose backward needs no input
// value -- RoPE, views, the collectives, a residual sum -- so the rerun passes zeros for it).
enum class Product { kRereadInBackward, kNotReread };

// The outputs of a region's linear layers: kept by its first run where the rerun reads them, handed
// back by the rerun rather than computed again (the matrix products are what is costly to
// recompute; the norms, RoPE and the SwiGLU product are cheap and their outputs as large).
class LinearTape {
 public:
  // x W^T. First run: computes it and keeps it if `use` says the rerun reads it. Rerun: the kept
  // product (or zeros), wired into autograd so that backward computes x's and W's gradients as
  // at::linear's backward does -- from x and W, never from the product -- W's handed to `sink`
  // where hands_to_sink says so (sink_linear.h). With `fp8`, the product and both gradients are
  // FP8's (fp8_linear.h) on either run.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, Product use,
                    parallel::WeightGradientSink* sink = nullptr, Fp8Linears* fp8 = nullptr);
  // Before the rerun: hand the kept products back from the first.
  void rewind();

 private:
  std::vector<at::Tensor> kept_;
  size_t next_ = 0;
  bool replaying_ = false;
};

// x W^T through `tape` where there is one, else at::linear -- or, where hands_to_sink says so,
// with W's gradient handed to `sink` (sink_linear.h); with `fp8` (not with a sink), FP8's.
at::Tensor linear_through(LinearTape* tape, const at::Tensor& x, const at::Tensor& weight,
                          Product use = Product::kRereadInBackward,
                          parallel::WeightGradientSink* sink = nullptr, Fp8Linears* fp8 = nullptr);

// A region: its outputs from its inputs and the parameters it reads (it must read them from
// `parameters`, nothing else); linear layers go through `tape` (null: computed).
using Region = std::function<std::vector<at::Tensor>(
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& parameters, LinearTape* tape)>;

// Runs `region` on `inputs` keeping none of its activations but `inputs` (and, with
// `keep_linear_outputs`, its linear layers' outputs); backward runs it again and backpropagates
// through the rerun. The rerun reads `parameters` through aliases that carry no hooks, and their
// gradients leave as this node's outputs: they reach the parameters -- and their hooks -- once, as
// they would without recomputation. The region must compute the same values from the same inputs
// each time (no randomness).
std::vector<at::Tensor> run_recomputed(Region region, const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& parameters, bool keep_linear_outputs);

}  // namespace atl::runtime
