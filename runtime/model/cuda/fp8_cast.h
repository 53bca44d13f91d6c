// Launchers of the FP8 quantization kernels (fp8_cast.cu), in plain C++ with raw pointers so that
// only that file goes through nvcc: a tensor (fp32 or bf16) cast to FP8 with a scale from its own
// absolute maximum (dynamic scaling), one scale for the tensor or one per row. The kernels compute
// what fp8_tensor.h's composed ATen chain computes, bit for bit:
//   amax  = max |x|                      (over the tensor, or over each row)
//   scale = amax > 0 ? fp8_max / max(amax, 1e-12f) : 1     (fp32, one rounded division)
//   out   = fp8(clamp(x * scale, -fp8_max, fp8_max))       (fp32 product, round to nearest even)
//   inverse_scale = 1 / scale                              (what _scaled_mm multiplies back)
// Each runs on `stream` and returns at once; nothing is read back to the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/model/cuda/element_type.h"

namespace atl::runtime::cuda_kernels {

// E4M3 (largest finite 448, no infinity) and E5M2 (largest finite 57344), OCP's FP8 formats.
enum class Fp8Encoding { kE4M3, kE5M2 };

// One scale for the `n` contiguous elements of `x`: a pass that reduces the absolute maximum into
// `*amax` (device memory; zeroed here first), then a pass that casts into `out` (n bytes) and writes
// `*inverse_scale`. Two launches, no host synchronisation.
void fp8_quantize_tensorwise(ElementType type, Fp8Encoding encoding, const void* x, int64_t n, float* amax,
                             void* out, float* inverse_scale, cudaStream_t stream);

// One scale per row of the contiguous `rows` x `cols` matrix `x`: one block per row reduces the
// row's absolute maximum, then casts the row (its second read mostly from cache); `amax` and
// `inverse_scale` hold `rows` floats each.
void fp8_quantize_rowwise(ElementType type, Fp8Encoding encoding, const void* x, int64_t rows, int64_t cols,
                          float* amax, void* out, float* inverse_scale, cudaStream_t stream);

}  // namespace atl::runtime::cuda_kernels
