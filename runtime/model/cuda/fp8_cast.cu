// The FP8 quantization kernels (fp8_cast.h). The composed ATen chain they replace -- |x|, its
// maximum, an fp32 copy of x, the product with the scale, the clamp and the cast -- reads and writes
// the tensor about eight times and keeps two fp32 copies alive; here the tensorwise form reads it
// twice (the maximum, then the cast) and writes one byte an element, and the rowwise form reads each
// row twice inside one block. The absolute maximum is reduced over the floats' bits as unsigned
// integers: for values without a sign their order is the values' order and every NaN lies above
// infinity, so a NaN propagates as at::amax propagates it, and atomicMax merges the blocks'.
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "runtime/model/cuda/fp8_cast.h"
#include "runtime/model/cuda/kernel_common.cuh"

namespace atl::runtime::cuda_kernels {
namespace {

using namespace device;  // NOLINT(google-build-using-namespace): this file's kernels are built of them
using namespace host;    // NOLINT(google-build-using-namespace)

constexpr int kThreads = 256;         // a power of two of whole warps (block_max)
constexpr int kMaxAmaxBlocks = 1024;  // the tensorwise maximum's grid: one atomic per block
constexpr float kAmaxFloor = 1e-12f;  // keeps fp8_max / amax finite for the tiniest nonzero amax

// The format written: its largest finite value and the conversion's interpretation.
struct Target {
  float max;
  __nv_fp8_interpretation_t kind;
};

Target target_of(Fp8Encoding encoding) {
  return encoding == Fp8Encoding::kE4M3 ? Target{448.0f, __NV_E4M3} : Target{57344.0f, __NV_E5M2};
}

__device__ inline unsigned int abs_bits(float v) {
  return __float_as_uint(v) & 0x7fffffffu;
}

// The block's maximum, in every thread. Called once per kernel (its shared array is not reused).
__device__ inline unsigned int block_max(unsigned int mine) {
  __shared__ unsigned int per_warp[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) mine = max(mine, __shfl_xor_sync(0xffffffffu, mine, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) per_warp[warp] = mine;
  __syncthreads();
  unsigned int all = 0;
  for (int w = 0; w < kThreads / 32; ++w) all = max(all, per_warp[w]);
  return all;
}

// fp8_max / max(amax, floor), or 1 for an all-zero tensor or row. A NaN amax also gives 1 (the
// comparison fails, as at::where's does), and its NaN elements stay NaN through the cast.
__device__ inline float scale_for(unsigned int amax_bits, float fp8_max) {
  const float amax = __uint_as_float(amax_bits);
  return amax > 0.0f ? __fdiv_rn(fp8_max, fmaxf(amax, kAmaxFloor)) : 1.0f;
}

// The product rounded once in fp32, clamped into the format's range (NaN kept, as at::clamp keeps
// it), then rounded to nearest even; the clamp leaves the saturating conversion nothing to saturate.
__device__ inline __nv_fp8_storage_t cast(float x, float scale, Target target) {
  float y = __fmul_rn(x, scale);
  if (!isnan(y)) y = fminf(fmaxf(y, -target.max), target.max);
  return __nv_cvt_float_to_fp8(y, __NV_SATFINITE, target.kind);
}

__device__ inline int64_t first_group() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t group_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename T, int W>
__global__ void amax_kernel(const T* x, int64_t groups, unsigned int* amax_bits) {
  unsigned int mine = 0;
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const Pack<T, W> p = load<T, W>(x, g * W);
#pragma unroll
    for (int k = 0; k < W; ++k) mine = max(mine, abs_bits(to_float(p.v[k])));
  }
  const unsigned int all = block_max(mine);
  if (threadIdx.x == 0) atomicMax(amax_bits, all);
}

template <typename T, int W>
__global__ void cast_tensorwise_kernel(const T* x, int64_t groups, const unsigned int* amax_bits,
                                       Target target, __nv_fp8_storage_t* out, float* inverse_scale) {
  const float scale = scale_for(*amax_bits, target.max);
  if (blockIdx.x == 0 && threadIdx.x == 0) *inverse_scale = __fdiv_rn(1.0f, scale);
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const Pack<T, W> p = load<T, W>(x, g * W);
    Pack<__nv_fp8_storage_t, W> q;
#pragma unroll
    for (int k = 0; k < W; ++k) q.v[k] = cast(to_float(p.v[k]), scale, target);
    store<__nv_fp8_storage_t, W>(out, g * W, q);
  }
}

// One block per row: the row's maximum, then its cast.
template <typename T, int W>
__global__ void rowwise_kernel(const T* x, int64_t cols, Target target, float* amax, __nv_fp8_storage_t* out,
                               float* inverse_scale) {
  const int64_t r = blockIdx.x;
  const T* row = x + r * cols;
  __nv_fp8_storage_t* out_row = out + r * cols;
  const int64_t groups = cols / W;
  unsigned int mine = 0;
  for (int64_t g = threadIdx.x; g < groups; g += kThreads) {
    const Pack<T, W> p = load<T, W>(row, g * W);
#pragma unroll
    for (int k = 0; k < W; ++k) mine = max(mine, abs_bits(to_float(p.v[k])));
  }
  const unsigned int bits = block_max(mine);
  const float scale = scale_for(bits, target.max);
  if (threadIdx.x == 0) {
    amax[r] = __uint_as_float(bits);
    inverse_scale[r] = __fdiv_rn(1.0f, scale);
  }
  for (int64_t g = threadIdx.x; g < groups; g += kThreads) {
    const Pack<T, W> p = load<T, W>(row, g * W);
    Pack<__nv_fp8_storage_t, W> q;
#pragma unroll
    for (int k = 0; k < W; ++k) q.v[k] = cast(to_float(p.v[k]), scale, target);
    store<__nv_fp8_storage_t, W>(out_row, g * W, q);
  }
}

int blocks_for(int64_t groups) {
  const int64_t blocks = (groups + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, 1 << 20));  // grid-stride beyond that
}

template <typename T, int W>
struct Tensorwise {
  static void run(const void* x, int64_t n, unsigned int* amax_bits, Target target, void* out,
                  float* inverse_scale, cudaStream_t stream) {
    const int64_t groups = n / W;
    const int blocks = blocks_for(groups);
    amax_kernel<T, W><<<std::min(blocks, kMaxAmaxBlocks), kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                                 groups, amax_bits);
    cast_tensorwise_kernel<T, W>
        <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), groups, amax_bits, target,
                                          static_cast<__nv_fp8_storage_t*>(out), inverse_scale);
  }
};

template <typename T, int W>
struct Rowwise {
  static void run(const void* x, int64_t rows, int64_t cols, Target target, float* amax, void* out,
                  float* inverse_scale, cudaStream_t stream) {
    rowwise_kernel<T, W><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), cols, target, amax, static_cast<__nv_fp8_storage_t*>(out), inverse_scale);
  }
};

}  // namespace

void fp8_quantize_tensorwise(ElementType type, Fp8Encoding encoding, const void* x, int64_t n, float* amax,
                             void* out, float* inverse_scale, cudaStream_t stream) {
  const cudaError_t zeroed = cudaMemsetAsync(amax, 0, sizeof(float), stream);
  if (zeroed != cudaSuccess)
    throw std::runtime_error(std::string("fp8_quantize_tensorwise: ") + cudaGetErrorString(zeroed));
  // An empty tensor keeps amax 0: the cast's only work is the scale 1 (one thread, no element).
  const bool vectorizable = n % pack_width(type) == 0 && aligned({x, out});
  dispatch<Tensorwise>(type, vectorizable, x, n, reinterpret_cast<unsigned int*>(amax), target_of(encoding),
                       out, inverse_scale, stream);
  check_launch("fp8_quantize_tensorwise");
}

void fp8_quantize_rowwise(ElementType type, Fp8Encoding encoding, const void* x, int64_t rows, int64_t cols,
                          float* amax, void* out, float* inverse_scale, cudaStream_t stream) {
  if (rows == 0) return;
  const bool vectorizable = cols % pack_width(type) == 0 && aligned({x, out});
  dispatch<Rowwise>(type, vectorizable, x, rows, cols, target_of(encoding), amax, out, inverse_scale, stream);
  check_launch("fp8_quantize_rowwise");
}

}  // namespace atl::runtime::cuda_kernels
