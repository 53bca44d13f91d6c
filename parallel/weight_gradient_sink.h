// WeightGradientSink: a data-parallel engine that takes a linear layer's weight gradient from the
// layer's own backward, written by the weight-gradient matrix product straight into the engine's flat
// gradient buffer (Megatron-LM's gradient_accumulation_fusion), instead of from autograd as a fresh
// tensor that is then copied there: one read and one write of every such gradient less a step.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::parallel {

class WeightGradientSink {
 public:
  virtual ~WeightGradientSink() = default;
  // Whether `weight` (a parameter, or an alias of its storage) takes its gradient here.
  virtual bool receives(const at::Tensor& weight) const = 0;
  // Lands dW = dy_rows^T x_rows ([rows, out]^T [rows, in]) as one of `weight`'s gradients of this
  // step: the step's first is that product itself, later ones are added to it. In the buffer's
  // dtype: under mixed precision the 16-bit operands' product reaches the fp32 buffer unrounded.
  virtual void land_weight_gradient(const at::Tensor& weight, const at::Tensor& dy_rows,
                                    const at::Tensor& x_rows) = 0;
};

}  // namespace atl::parallel
