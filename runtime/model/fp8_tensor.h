// FP8 tensors with dynamic scaling, and the matrix product of two of them: the numerics of
// train.precision fp8 (fp8_linear.h builds a linear layer's three products from them).
//
// The scaling recipe (torchao's dynamic "tensorwise" and "rowwise", TransformerEngine's current
// scaling): a tensor is scaled by the current tensor's own absolute maximum, never a stale one, so
// its largest element lands on the format's largest finite value:
//   scale = fp8_max / max(amax, 1e-12)  where amax > 0;   scale = 1 where amax == 0
//   data  = fp8(clamp(x * scale, -fp8_max, fp8_max))      (x * scale rounded once in fp32, then to
//                                                          the nearest even FP8 value)
//   inverse_scale = 1 / scale                             (fp32; what dequantizes: data * inverse_scale)
// The floor keeps the scale finite for the tiniest nonzero maximum; an all-zero tensor keeps scale 1
// (its data zeros, dequantizing to exact zeros). The clamp means saturation never makes an infinity
// (E5M2) or a NaN (E4M3 in LibTorch releases whose cast does not saturate): x * scale can round past
// fp8_max by an ulp of fp32, and a value beyond it from any other scale lands on +-fp8_max.
// Rowwise scaling keeps one scale per row -- the product's outer dimension, the maximum taken over
// the contraction dimension -- so one outlier token costs only its own row's resolution.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "runtime/config/config.h"

namespace atl::runtime {

// E4M3 (at::kFloat8_e4m3fn: 3 mantissa bits, largest 448, no infinity) and E5M2 (at::kFloat8_e5m2:
// 2 mantissa bits, largest 57344), OCP's FP8 formats as Hopper's tensor cores take them.
enum class Fp8Format { kE4M3, kE5M2 };

at::ScalarType fp8_dtype(Fp8Format format);
// The largest finite value: 448 or 57344.
float fp8_max(Fp8Format format);
// Explicit mantissa bits: 3 or 2. A value in the normal range rounds with a relative error of at most
// 2^-(bits + 1).
int fp8_mantissa_bits(Fp8Format format);
// The smallest subnormal: 2^-9 or 2^-16. Below the normal range a value rounds with an absolute error of
// at most half of it.
double fp8_smallest_subnormal(Fp8Format format);

// The smallest amax the scale divides by (the floor above).
inline constexpr float kFp8AmaxFloor = 1e-12f;

// Fp8Scaling (runtime/config/config.h, train.fp8_scaling): kTensorwise, one scale for the whole
// tensor; kRowwise, one scale per row of a [rows, cols] matrix, from that row's maximum.

// An FP8 tensor and the factor that dequantizes it: `data` (at::kFloat8_e4m3fn or at::kFloat8_e5m2),
// `inverse_scale` fp32 on data's device, a 0-dim tensor (tensorwise) or [rows, 1] (rowwise) -- the
// form at::_scaled_mm takes for its scale_a.
struct Fp8Tensor {
  at::Tensor data;
  at::Tensor inverse_scale;
};

// The scale from an absolute maximum (fp32 tensor of any shape), elementwise: the recipe above.
at::Tensor fp8_scale_from_amax(const at::Tensor& amax, Fp8Format format);

// clamp(x * scale, -fp8_max, fp8_max) cast to the format; x in fp32 (other dtypes are cast to fp32
// first), `scale` an fp32 tensor that broadcasts against x. The recipe's cast, for any scale.
at::Tensor cast_to_fp8(const at::Tensor& x, const at::Tensor& scale, Fp8Format format);

// x (fp32 or bf16; rowwise: a [rows, cols] matrix) quantized with dynamic scaling. On a CUDA tensor
// with the CUDA path built, contiguous, in fp32 or bf16: the fused kernels of cuda/fp8_cast.h (the
// amax pass and the cast pass, no host synchronisation); anywhere else quantize_composed.
Fp8Tensor quantize(const at::Tensor& x, Fp8Format format, Fp8Scaling scaling);
// The same values from composed ATen operations (the fused kernels' reference).
Fp8Tensor quantize_composed(const at::Tensor& x, Fp8Format format, Fp8Scaling scaling);
// Whether quantize takes the fused kernels for x.
bool fp8_cast_kernel_takes(const at::Tensor& x, Fp8Scaling scaling);

// data * inverse_scale in fp32.
at::Tensor dequantize(const Fp8Tensor& t);

// A tensorwise matrix's transpose in contiguous memory, the same scale (an FP8 value transposed is
// the value quantized from the transpose). std::invalid_argument for a rowwise one: its scales run
// along the rows, and the transpose's rows need scales of their own (quantize it again).
Fp8Tensor transposed(const Fp8Tensor& t);

// Where the product of two FP8 matrices runs.
enum class Fp8Backend {
  kAuto,      // at::_scaled_mm on a CUDA tensor, the emulation on the CPU
  kScaledMm,  // at::_scaled_mm (cuBLASLt on a GPU; LibTorch's reference kernel on the CPU)
  kEmulated,  // dequantize(a) @ dequantize(b)^T in fp32, cast to the output dtype
};

// a @ b^T for a = [M, K] and b = [N, K], both contiguous with K innermost (the contraction dimension
// is each operand's rows' length: what cuBLASLt's FP8 kernels on Hopper take, a row-major first
// operand and a column-major second), scales contiguous fp32, both tensorwise or both rowwise, in
// `out_dtype` (bf16, fp16 or fp32; bf16 only for rowwise). Through at::_scaled_mm(a.data,
// b.data.t(), a.inverse_scale, b's scale as [1, N]): K and N must be multiples of 16, and two E5M2
// operands are refused (cuBLASLt has no E5M2 x E5M2 kernel). Every backend checks what the GPU's
// call needs; std::invalid_argument names the first that fails. `fast_accumulation`:
// _scaled_mm's use_fast_accum (Hopper's FP8 accumulator without the periodic promotion to fp32);
// the emulation ignores it.
at::Tensor fp8_mm(const Fp8Tensor& a, const Fp8Tensor& b, at::ScalarType out_dtype,
                  bool fast_accumulation = false, Fp8Backend backend = Fp8Backend::kAuto);

// Why a GPU of compute capability major.minor cannot run FP8 products under `scaling` through
// LibTorch's _scaled_mm, or "" where it can: tensorwise from Ada (8.9: cuBLASLt's FP8 kernels),
// rowwise from Hopper (9.0: the CUTLASS kernel LibTorch builds for it). Blackwell (10.x, 12.x) is
// let through, not yet verified.
std::string fp8_unsupported_on(int major, int minor, Fp8Scaling scaling);

}  // namespace atl::runtime
