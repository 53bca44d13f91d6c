// A linear layer whose weight gradient lands in a WeightGradientSink (the data-parallel engine's flat
// gradient buffer, written by the weight-gradient matrix product itself) while autograd carries only
// the input's gradient on: Megatron-LM's gradient_accumulation_fusion, for kernels.fused_weight_grad.
#pragma once

#include <ATen/core/Tensor.h>

#include "parallel/weight_gradient_sink.h"

namespace atl::runtime {

// Whether x W^T should go through linear_landing_in_sink: gradients are being recorded, W needs one
// and `sink` takes it, and x carries a gradient too (the landing happens in x's backward, so only a
// graph that reaches x runs it).
bool lands_in_sink(const parallel::WeightGradientSink* sink, const at::Tensor& x, const at::Tensor& weight);

// x W^T (or `product`, when the caller already has it: a recomputation's kept output). Backward
// computes dx = dy W as at::linear's does and hands dy and x to the sink for dW = dy^T x; the
// weight gets no gradient through autograd (nor its hooks a call).
at::Tensor linear_landing_in_sink(const at::Tensor& x, const at::Tensor& weight,
                                  parallel::WeightGradientSink& sink, const at::Tensor& product = {});

}  // namespace atl::runtime
