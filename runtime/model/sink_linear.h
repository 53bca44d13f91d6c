// A linear layer with at::linear's backward written out, from x and W -- dx = dy W, dW = dy^T x over
// the flattened rows, the same matrix products, so the same gradients bit for bit -- for the two
// things autograd's own record of at::linear cannot do: start from a product already known (a
// recomputation's kept output, recompute.h), and hand W's gradient to a WeightGradientSink (the
// data-parallel engine's flat gradient buffer, written by the weight-gradient matrix product itself)
// while autograd carries only the input's gradient on: Megatron-LM's gradient_accumulation_fusion,
// for kernels.fused_weight_grad.
#pragma once

#include <ATen/core/Tensor.h>

#include "parallel/weight_gradient_sink.h"

namespace atl::runtime {

// Whether x W^T's backward hands W's gradient to `sink` (linear_from_product with the sink):
// gradients are being recorded, W needs one and `sink` receives it, and x carries a gradient too
// (the hand-over happens in x's backward, so only a graph that reaches x runs it). Where not, W's
// gradient goes through autograd.
bool hands_to_sink(const parallel::WeightGradientSink* sink, const at::Tensor& x, const at::Tensor& weight);

// x W^T: `product` where the caller already has it, else computed here. Backward computes dx as
// at::linear's does, and dW too -- through autograd, or with `sink` (where hands_to_sink says so)
// handed to the sink for dW = dy^T x, W then getting no gradient through autograd (nor its hooks
// a call).
at::Tensor linear_from_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& product,
                               parallel::WeightGradientSink* sink = nullptr);

}  // namespace atl::runtime
