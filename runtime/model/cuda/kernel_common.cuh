// What the model's CUDA kernels share (fused_elementwise.cu, fused_cross_entropy.cu): element
// conversions that round as an ATen kernel storing that type would, 16-byte packed accesses, and
// the host side's alignment check, launch check and dispatch over element type and pack width.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "runtime/model/cuda/element_type.h"

namespace atl::runtime::cuda_kernels::device {

__device__ inline float to_float(float v) {
  return v;
}
__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
// What a separate ATen kernel with a T output would have stored, read back.
template <typename T>
__device__ inline float rounded(float v) {
  return to_float(from_float<T>(v));
}

// W elements moved as one aligned access (16 bytes where the host found the pointers aligned).
template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};
template <typename T, int W>
__device__ inline Pack<T, W> load(const T* base, int64_t i) {
  return *reinterpret_cast<const Pack<T, W>*>(base + i);
}
template <typename T, int W>
__device__ inline void store(T* base, int64_t i, const Pack<T, W>& pack) {
  *reinterpret_cast<Pack<T, W>*>(base + i) = pack;
}

}  // namespace atl::runtime::cuda_kernels::device

namespace atl::runtime::cuda_kernels::host {

inline bool aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

inline void check_launch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": CUDA kernel launch failed: " + cudaGetErrorString(error));
}

// Runs Launch<T, W>::run(args...) for the element type, with W = 16 bytes of T where `vectorizable`,
// else 1.
template <template <typename, int> class Launch, typename... Args>
void dispatch(ElementType type, bool vectorizable, Args... args) {
  if (type == ElementType::kBFloat16) {
    if (vectorizable)
      Launch<__nv_bfloat16, 8>::run(args...);
    else
      Launch<__nv_bfloat16, 1>::run(args...);
  } else {
    if (vectorizable)
      Launch<float, 4>::run(args...);
    else
      Launch<float, 1>::run(args...);
  }
}

inline int pack_width(ElementType type) {
  return type == ElementType::kBFloat16 ? 8 : 4;
}

}  // namespace atl::runtime::cuda_kernels::host
