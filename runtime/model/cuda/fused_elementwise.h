// Launchers of the model's fused elementwise CUDA kernels (fused_elementwise.cu), in plain C++ with
// raw pointers, so that only that file goes through nvcc and it needs no LibTorch header. Every
// kernel computes in fp32 and rounds to the element type where the ATen operations it replaces round
// their outputs, so its results are theirs (fused_ops.h says which are bit for bit). Each runs on
// `stream` and returns at once; contiguous tensors of `n` elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/model/cuda/element_type.h"

namespace atl::runtime::cuda_kernels {

// out = silu(gate_in) * up, SwiGLU's product.
void swiglu_forward(ElementType type, const void* gate_in, const void* up, void* out, int64_t n,
                    cudaStream_t stream);
// Its backward from the forward's inputs (the silu output is recomputed, never stored):
// d_gate_in = d_out * up * silu'(gate_in), d_up = d_out * silu(gate_in).
void swiglu_backward(ElementType type, const void* d_out, const void* gate_in, const void* up,
                     void* d_gate_in, void* d_up, int64_t n, cudaStream_t stream);

// Rotary position embedding over `x`, the contiguous [batch, seq, heads, head_dim] memory of q or k:
// out = x * cos + swap_halves(x) * signed_sin, the tables [seq, head_dim] (rope_tables). The
// backward is the same rotation by the opposite angle: `rope(d_out, cos, -signed_sin)` would round
// differently from autograd's, so it has its own kernel.
void rope_forward(ElementType type, const void* x, const void* cos, const void* signed_sin, void* out,
                  int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream);
void rope_backward(ElementType type, const void* d_out, const void* cos, const void* signed_sin, void* d_x,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream);

}  // namespace atl::runtime::cuda_kernels
