// SwiGLU's product and RoPE as single fused CUDA kernels each way (cuda/fused_elementwise.cu), for
// the kernels levers fused_swiglu and fused_rope. Each rounds where the ATen chain it replaces
// rounds, so it computes that chain's values: RoPE forward and backward and SwiGLU's forward bit for
// bit, SwiGLU's backward up to whether nvcc fused a multiply-add as in LibTorch's build
// (tests/gpu/test_fused_ops.cpp measures both). Autograd sees one operation each; SwiGLU keeps only
// its two inputs for backward (the chain also kept the silu output: a [tokens, ffn] tensor a layer).
// And the cross-entropy in two kernels (cuda/fused_cross_entropy.cu, lever fused_cross_entropy):
// the chain's value up to the order of its fp32 sums.
#pragma once

#include <ATen/ATen.h>

namespace atl::runtime {

// Whether this build has the kernels (the CUDA path); without them the callers keep the ATen chain.
bool fused_ops_built();

// silu(gate_in) * up; CUDA tensors of one shape and dtype (fp32 or bf16), contiguous.
at::Tensor fused_swiglu(const at::Tensor& gate_in, const at::Tensor& up);

// x * cos + swap_halves(x) * signed_sin (llama.h's apply_rope) for x = [batch, heads, seq, head_dim]
// viewing contiguous [batch, seq, heads, head_dim] memory (what a linear layer's output reshaped
// gives), tables [seq, head_dim] contiguous; CUDA, fp32 or bf16. The result has x's layout.
at::Tensor fused_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin);

// The mean cross-entropy of `logits` [rows, vocab] (CUDA, fp32 or bf16, unit stride along a row:
// a narrowed padded vocabulary is fine) against int64 `targets` [rows]: at::cross_entropy_loss of
// the logits cast to fp32, without the fp32 copy and log-softmax (cuda/fused_cross_entropy.h). The
// same value up to fp32 rounding of the sums (another order); the gradient in the logits' type.
at::Tensor fused_cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

// Whether the fused operations take these tensors (else the caller runs the ATen chain).
bool fused_swiglu_takes(const at::Tensor& gate_in, const at::Tensor& up);
bool fused_rope_takes(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin);
bool fused_cross_entropy_takes(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace atl::runtime
