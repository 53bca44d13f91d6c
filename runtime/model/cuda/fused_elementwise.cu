// The model's fused elementwise kernels (fused_elementwise.h). Each replaces a chain of ATen kernels
// that read and wrote the whole tensor once per operation: SwiGLU's silu and product (forward 5
// tensor passes -> 3, backward 9 -> 5, and no silu output kept for backward), and RoPE's product,
// half swap, product and sum (the H100 profile of the 1B bench: RoPE and SwiGLU's elementwise
// kernels were 17% of a step's GPU time). Every product and sum is rounded to the element type
// where the ATen operation it replaces wrote its output, with the _rn intrinsics where no rounding
// intervenes, so that nvcc cannot contract them into a fused multiply-add ATen did not do.
#include <algorithm>
#include <cstdint>

#include "runtime/model/cuda/fused_elementwise.h"
#include "runtime/model/cuda/kernel_common.cuh"

namespace atl::runtime::cuda_kernels {
namespace {

using namespace device;  // NOLINT(google-build-using-namespace): this file's kernels are built of them
using namespace host;    // NOLINT(google-build-using-namespace)

// ATen's silu and sigmoid in fp32: x / (1 + exp(-x)), 1 / (1 + exp(-x)).
__device__ inline float silu(float x) {
  return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
}
__device__ inline float sigmoid(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

__device__ inline int64_t first_group() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t group_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename T, int W>
__global__ void swiglu_forward_kernel(const T* gate_in, const T* up, T* out, int64_t groups) {
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const Pack<T, W> a = load<T, W>(gate_in, g * W), u = load<T, W>(up, g * W);
    Pack<T, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k)
      y.v[k] = from_float<T>(__fmul_rn(rounded<T>(silu(to_float(a.v[k]))), to_float(u.v[k])));
    store<T, W>(out, g * W, y);
  }
}

template <typename T, int W>
__global__ void swiglu_backward_kernel(const T* d_out, const T* gate_in, const T* up, T* d_gate_in, T* d_up,
                                       int64_t groups) {
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const Pack<T, W> dy = load<T, W>(d_out, g * W), a = load<T, W>(gate_in, g * W), u = load<T, W>(up, g * W);
    Pack<T, W> da, du;
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float x = to_float(a.v[k]), grad = to_float(dy.v[k]);
      // The product's backward: each factor's gradient is the output's times the other factor.
      du.v[k] = from_float<T>(__fmul_rn(grad, rounded<T>(silu(x))));
      const float d_gate = rounded<T>(__fmul_rn(grad, to_float(u.v[k])));
      // ATen's silu_backward, as written there: dy * s * (1 + x * (1 - s)).
      const float s = sigmoid(x);
      da.v[k] = from_float<T>(d_gate * s * (1.0f + x * (1.0f - s)));
    }
    store<T, W>(d_gate_in, g * W, da);
    store<T, W>(d_up, g * W, du);
  }
}

// One rotation step over memory [batch, seq, heads, head_dim]: out = rounded(x * a) + rounded(x' * b),
// x' the element head_dim/2 away in the same head, `a` this element's table entry and `b` the
// partner's (`partner_table`) or this one's. Groups of W never straddle a half (the host checks).
template <typename T, int W, bool kPartnerTable>
__global__ void rope_kernel(const T* x, const T* first_table, const T* second_table, T* out, int64_t groups,
                            int64_t seq, int64_t heads, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const int64_t i = g * W;
    const int64_t d = i % head_dim;
    const int64_t position = (i / (heads * head_dim)) % seq;
    const int64_t partner_offset = d < half ? half : -half;
    const int64_t row = position * head_dim;
    const Pack<T, W> self = load<T, W>(x, i), partner = load<T, W>(x, i + partner_offset);
    const Pack<T, W> a = load<T, W>(first_table, row + d);
    const Pack<T, W> b = load<T, W>(second_table, row + d + (kPartnerTable ? partner_offset : 0));
    Pack<T, W> y;
#pragma unroll
    for (int k = 0; k < W; ++k)
      y.v[k] = from_float<T>(__fadd_rn(rounded<T>(__fmul_rn(to_float(self.v[k]), to_float(a.v[k]))),
                                       rounded<T>(__fmul_rn(to_float(partner.v[k]), to_float(b.v[k])))));
    store<T, W>(out, i, y);
  }
}

constexpr int kThreads = 256;

int blocks_for(int64_t groups) {
  const int64_t blocks = (groups + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, 1 << 20));  // grid-stride beyond that
}

template <typename T, int W>
struct SwigluForward {
  static void run(const void* gate_in, const void* up, void* out, int64_t n, cudaStream_t stream) {
    const int64_t groups = n / W;
    swiglu_forward_kernel<T, W><<<blocks_for(groups), kThreads, 0, stream>>>(
        static_cast<const T*>(gate_in), static_cast<const T*>(up), static_cast<T*>(out), groups);
  }
};

template <typename T, int W>
struct SwigluBackward {
  static void run(const void* d_out, const void* gate_in, const void* up, void* d_gate_in, void* d_up,
                  int64_t n, cudaStream_t stream) {
    const int64_t groups = n / W;
    swiglu_backward_kernel<T, W><<<blocks_for(groups), kThreads, 0, stream>>>(
        static_cast<const T*>(d_out), static_cast<const T*>(gate_in), static_cast<const T*>(up),
        static_cast<T*>(d_gate_in), static_cast<T*>(d_up), groups);
  }
};

template <bool kPartnerTable>
struct Rope {
  template <typename T, int W>
  struct Launch {
    static void run(const void* in, const void* cos, const void* signed_sin, void* out, int64_t n,
                    int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream) {
      const int64_t groups = n / W;
      rope_kernel<T, W, kPartnerTable><<<blocks_for(groups), kThreads, 0, stream>>>(
          static_cast<const T*>(in), static_cast<const T*>(cos), static_cast<const T*>(signed_sin),
          static_cast<T*>(out), groups, seq, heads, head_dim);
    }
  };
};

}  // namespace

void swiglu_forward(ElementType type, const void* gate_in, const void* up, void* out, int64_t n,
                    cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorizable = n % pack_width(type) == 0 && aligned({gate_in, up, out});
  dispatch<SwigluForward>(type, vectorizable, gate_in, up, out, n, stream);
  check_launch("swiglu_forward");
}

void swiglu_backward(ElementType type, const void* d_out, const void* gate_in, const void* up,
                     void* d_gate_in, void* d_up, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorizable = n % pack_width(type) == 0 && aligned({d_out, gate_in, up, d_gate_in, d_up});
  dispatch<SwigluBackward>(type, vectorizable, d_out, gate_in, up, d_gate_in, d_up, n, stream);
  check_launch("swiglu_backward");
}

namespace {

// The forward rotates by the tables at each element; the backward takes the partner's sine entry
// (the gradient of x' * b lands on x').
template <bool kPartnerTable>
void rope(const char* what, ElementType type, const void* in, const void* cos, const void* signed_sin,
          void* out, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  const int64_t n = batch * seq * heads * head_dim;
  if (n == 0) return;
  if (head_dim % 2 != 0) throw std::invalid_argument(std::string(what) + ": head_dim must be even");
  const bool vectorizable = (head_dim / 2) % pack_width(type) == 0 && aligned({in, cos, signed_sin, out});
  dispatch<Rope<kPartnerTable>::template Launch>(type, vectorizable, in, cos, signed_sin, out, n, seq, heads,
                                                 head_dim, stream);
  check_launch(what);
}

}  // namespace

void rope_forward(ElementType type, const void* x, const void* cos, const void* signed_sin, void* out,
                  int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  rope<false>("rope_forward", type, x, cos, signed_sin, out, batch, seq, heads, head_dim, stream);
}

void rope_backward(ElementType type, const void* d_out, const void* cos, const void* signed_sin, void* d_x,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  rope<true>("rope_backward", type, d_out, cos, signed_sin, d_x, batch, seq, heads, head_dim, stream);
}

}  // namespace atl::runtime::cuda_kernels
