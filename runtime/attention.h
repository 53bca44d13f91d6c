// Causal scaled-dot-product attention with a hand-written backward.
//
// Why not compose it from matmul/softmax: autograd then keeps more [batch*heads, seq, seq]
// temporaries alive and runs more passes over them (scale, mask, softmax backward) than needed.
// Here every product is a contiguous batched GEMM over [batch*heads, seq, *] and the softmax
// backward is two in-place passes over the saved probabilities.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::runtime {

// q, k, v: [batch, heads, seq, head_dim] (k and v already expanded to the query heads).
// mask: [seq, seq] additive causal mask (0 / -inf). Returns [batch, heads, seq, head_dim].
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask);

}  // namespace atl::runtime
