// Causal scaled-dot-product attention: LibTorch's fused at::scaled_dot_product_attention
// (flash-attention CPU kernels) or a hand-written one, whichever was measured faster for the dtype
// and sequence length (bench/bench_attention.cpp).
//
// Why a hand-written one at all, rather than composing it from matmul/softmax: autograd then keeps more
// [batch*heads, seq, seq] temporaries alive and runs more passes over them (scale, mask, softmax backward)
// than needed. Here every product is a contiguous batched GEMM over [batch*heads, seq, *] and the softmax
// backward is two in-place passes over the saved probabilities.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::runtime {

// Measured on one CPU thread, batch 8 x 8 heads x head_dim 32, forward + backward (LibTorch
// 2.14): the fused kernel is 1.3x, 1.9x, 2.8x faster in fp32 at seq 256, 512, 1024, but in bf16
// 0.43x and 0.85x at seq 256 and 512 (1.5x at 1024). So: fused unless bf16 up to seq 512.
bool fused_attention_is_faster(at::ScalarType dtype, int64_t seq);

// Whether causal_attention runs the fused kernel: always on a GPU, where it was measured faster on
// the CPU. (Recomputation and `atoll plan` ask too: the fused kernel keeps no [seq, seq] probabilities.)
bool causal_attention_is_fused(bool cuda, at::ScalarType dtype, int64_t seq);

// The additive causal mask the hand-written kernel takes: [seq, seq], 0 on and below the diagonal,
// -inf above, in `dtype`.
at::Tensor causal_mask(int64_t seq, at::ScalarType dtype);

// q, k, v: [batch, heads, seq, head_dim] (k and v already expanded to the query heads).
// mask: [seq, seq] additive causal mask (0 / -inf), used by the hand-written kernel only.
// Returns [batch, heads, seq, head_dim], by the kernel causal_attention_is_fused picks.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask);

// q: [batch, heads, seq, head_dim]; k, v: [batch, kv_heads, seq, head_dim], kv_heads dividing heads:
// the fused kernel with the grouping inside it (SDPA's enable_gqa), for GPUs.
at::Tensor grouped_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// Causal attention within documents: q: [batch, heads, seq, head_dim]; k, v: [batch, kv_heads, seq,
// head_dim], kv_heads dividing heads (repeated here for the query heads); mask: bool [batch, 1, seq,
// seq], true where a query may see a key (parallel::document_causal_mask). SDPA with the mask: on the
// CPU LibTorch's flash kernel, which takes a mask; on a GPU flash attention takes none, so SDPA runs
// the memory-efficient kernel (or cuDNN's where it takes the mask, or the math fallback).
at::Tensor document_masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& mask);

// The hand-written kernel itself (tests and the benchmark compare it with the fused one).
at::Tensor handwritten_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& mask);

}  // namespace atl::runtime
