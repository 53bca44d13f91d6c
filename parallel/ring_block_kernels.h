// One block of ring attention (context_parallel_attention.h) through SDPA's fused kernels that
// return the log-sum-exp of each query's scores, which the ring merges partial outputs by:
// on the CPU the flash kernel's CPU variant; on a GPU the flash kernel for bf16/fp16 blocks that
// need no additive mask, else the memory-efficient kernel (fp32, or a document-cut block's mask).
#pragma once

#include <ATen/core/Tensor.h>

#include "parallel/document_mask.h"

namespace atl::parallel {

struct BlockAttention {
  at::Tensor out;  // [batch, heads, queries, head_dim], the queries' dtype
  at::Tensor lse;  // fp32 [batch, heads, queries]; -inf for a query that sees no key of the block
};

// q: [batch, heads, queries, head_dim]; k, v: [batch, heads, keys, head_dim] (kv heads repeated),
// the last dimension contiguous; `seen` not kNone.
BlockAttention attend_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const BlockMask& seen);

struct BlockGradients {
  at::Tensor dq, dk, dv;  // as q, k, v
};

// The block's gradients from the gradient of the WHOLE attention's output `d_out`, that output and
// its log-sum-exp (fp32 [batch, heads, queries]): the block's softmax against the complete
// denominator is exactly its share of the attention.
BlockGradients attend_block_backward(const at::Tensor& d_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                     const BlockMask& seen);

}  // namespace atl::parallel
