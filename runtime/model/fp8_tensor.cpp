#include "runtime/model/fp8_tensor.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "atoll/build_config.h"

#if ATOLL_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "runtime/model/cuda/fp8_cast.h"
#endif

namespace atl::runtime {
namespace {

bool is_fp8(at::ScalarType type) {
  return type == at::kFloat8_e4m3fn || type == at::kFloat8_e5m2;
}

void check_quantizable(const at::Tensor& x, Fp8Scaling scaling, const char* what) {
  if (!at::isFloatingType(x.scalar_type()) || is_fp8(x.scalar_type()))
    throw std::invalid_argument(std::string(what) + ": needs a floating-point tensor wider than FP8, got " +
                                c10::toString(x.scalar_type()));
  if (scaling == Fp8Scaling::kRowwise && x.dim() != 2)
    throw std::invalid_argument(std::string(what) + ": rowwise scaling needs a [rows, cols] matrix, got " +
                                std::to_string(x.dim()) + " dimensions");
}

bool rowwise(const Fp8Tensor& t) {
  return t.inverse_scale.dim() == 2;
}

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// The operands' shapes, types and scales and the output dtype as fp8_mm documents them: what the GPU's
// _scaled_mm takes, checked for every backend, so that a CPU run of the call is the GPU's call.
void check_operands(const Fp8Tensor& a, const Fp8Tensor& b, at::ScalarType out_dtype) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument("fp8_mm: " + why + " (a " + shape_of(a.data) + ", b " + shape_of(b.data) +
                                ")");
  };
  if (a.data.dim() != 2 || b.data.dim() != 2) fail("needs two matrices");
  if (a.data.size(1) != b.data.size(1)) fail("a @ b^T needs rows of one length");
  if (!is_fp8(a.data.scalar_type()) || !is_fp8(b.data.scalar_type())) fail("needs FP8 operands");
  if (rowwise(a) != rowwise(b)) fail("needs both operands scaled tensorwise or both rowwise");
  if (rowwise(a) && (a.inverse_scale.size(0) != a.data.size(0) || a.inverse_scale.size(1) != 1 ||
                     b.inverse_scale.size(0) != b.data.size(0) || b.inverse_scale.size(1) != 1))
    fail("rowwise scales must be [rows, 1]");
  if (!rowwise(a) && (a.inverse_scale.numel() != 1 || b.inverse_scale.numel() != 1))
    fail("tensorwise scales must be single values");
  for (const at::Tensor& scale : {a.inverse_scale, b.inverse_scale})
    if (scale.scalar_type() != at::kFloat || !scale.is_contiguous()) fail("scales must be contiguous fp32");
  if (out_dtype != at::kBFloat16 && out_dtype != at::kHalf && out_dtype != at::kFloat)
    fail("the output must be bf16, fp16 or fp32");
  if (rowwise(a) && out_dtype != at::kBFloat16) fail("a rowwise-scaled product's output must be bf16");
  if (!a.data.is_contiguous() || !b.data.is_contiguous()) fail("needs contiguous operands, K innermost");
  if (a.data.size(1) % 16 != 0) fail("cuBLASLt needs the contraction length K a multiple of 16");
  if (b.data.size(0) % 16 != 0) fail("cuBLASLt needs b's rows N a multiple of 16");
  if (a.data.scalar_type() == at::kFloat8_e5m2 && b.data.scalar_type() == at::kFloat8_e5m2)
    fail("cuBLASLt has no E5M2 x E5M2 product");
}

}  // namespace

std::string fp8_unsupported_on(int major, int minor, Fp8Scaling scaling) {
  const std::string capability = std::to_string(major) + "." + std::to_string(minor);
  if (major * 10 + minor < 89) return "compute capability " + capability + " has no FP8 tensor cores (8.9+)";
  if (scaling == Fp8Scaling::kRowwise && major < 9)
    return "compute capability " + capability +
           " runs tensorwise FP8 products only (LibTorch's rowwise kernel is Hopper's, 9.0+)";
  return "";
}

namespace {

#if ATOLL_CUDA

namespace kernels = cuda_kernels;

Fp8Tensor quantize_with_kernel(const at::Tensor& x, Fp8Format format, Fp8Scaling scaling) {
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const auto type =
      x.scalar_type() == at::kBFloat16 ? kernels::ElementType::kBFloat16 : kernels::ElementType::kFloat32;
  const auto encoding =
      format == Fp8Format::kE4M3 ? kernels::Fp8Encoding::kE4M3 : kernels::Fp8Encoding::kE5M2;
  const auto floats = x.options().dtype(at::kFloat);
  at::Tensor data = at::empty(x.sizes(), x.options().dtype(fp8_dtype(format)));
  if (scaling == Fp8Scaling::kTensorwise) {
    at::Tensor amax = at::empty({}, floats), inverse_scale = at::empty({}, floats);
    kernels::fp8_quantize_tensorwise(type, encoding, x.data_ptr(), x.numel(), amax.data_ptr<float>(),
                                     data.data_ptr(), inverse_scale.data_ptr<float>(), stream);
    return {data, inverse_scale};
  }
  const int64_t rows = x.size(0), cols = x.size(1);
  at::Tensor amax = at::empty({rows, 1}, floats), inverse_scale = at::empty({rows, 1}, floats);
  kernels::fp8_quantize_rowwise(type, encoding, x.data_ptr(), rows, cols, amax.data_ptr<float>(),
                                data.data_ptr(), inverse_scale.data_ptr<float>(), stream);
  return {data, inverse_scale};
}

#endif

}  // namespace

at::ScalarType fp8_dtype(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
}

float fp8_max(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? 448.0f : 57344.0f;
}

int fp8_mantissa_bits(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? 3 : 2;
}

double fp8_smallest_subnormal(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -16);
}

at::Tensor fp8_scale_from_amax(const at::Tensor& amax, Fp8Format format) {
  // Tensor by tensor, so that the division is one rounded fp32 division (a Scalar over a Tensor is
  // computed as a reciprocal and a product: two roundings).
  const at::Tensor floored = at::clamp_min(amax, kFp8AmaxFloor);
  return at::where(amax > 0, at::full_like(amax, fp8_max(format)) / floored, at::ones_like(amax));
}

at::Tensor cast_to_fp8(const at::Tensor& x, const at::Tensor& scale, Fp8Format format) {
  const double max = fp8_max(format);
  return at::clamp(x.to(at::kFloat) * scale, -max, max).to(fp8_dtype(format));
}

bool fp8_cast_kernel_takes(const at::Tensor& x, Fp8Scaling scaling) {
#if ATOLL_CUDA
  return x.is_cuda() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16) &&
         x.is_contiguous() && (scaling == Fp8Scaling::kTensorwise || x.dim() == 2);
#else
  (void)x;
  (void)scaling;
  return false;
#endif
}

Fp8Tensor quantize_composed(const at::Tensor& x, Fp8Format format, Fp8Scaling scaling) {
  check_quantizable(x, scaling, "quantize_composed");
  const at::Tensor xf = x.to(at::kFloat);
  const auto floats = xf.options();
  at::Tensor amax;
  if (scaling == Fp8Scaling::kTensorwise)
    amax = xf.numel() == 0 ? at::zeros({}, floats) : xf.abs().amax();
  else
    amax = xf.size(1) == 0 ? at::zeros({xf.size(0), 1}, floats) : xf.abs().amax({1}, /*keepdim=*/true);
  const at::Tensor scale = fp8_scale_from_amax(amax, format);
  return {cast_to_fp8(xf, scale, format), at::full_like(scale, 1.0) / scale};
}

Fp8Tensor quantize(const at::Tensor& x, Fp8Format format, Fp8Scaling scaling) {
  check_quantizable(x, scaling, "quantize");
#if ATOLL_CUDA
  if (fp8_cast_kernel_takes(x, scaling)) return quantize_with_kernel(x, format, scaling);
#endif
  return quantize_composed(x, format, scaling);
}

at::Tensor dequantize(const Fp8Tensor& t) {
  return t.data.to(at::kFloat) * t.inverse_scale;
}

Fp8Tensor transposed(const Fp8Tensor& t) {
  if (t.data.dim() != 2 || rowwise(t))
    throw std::invalid_argument(
        "transposed: needs a tensorwise-scaled matrix (a rowwise one's transpose needs scales of its own)");
  return {t.data.t().contiguous(), t.inverse_scale};
}

at::Tensor fp8_mm(const Fp8Tensor& a, const Fp8Tensor& b, at::ScalarType out_dtype, bool fast_accumulation,
                  Fp8Backend backend) {
  if (backend == Fp8Backend::kAuto)
    backend = a.data.is_cuda() ? Fp8Backend::kScaledMm : Fp8Backend::kEmulated;
  check_operands(a, b, out_dtype);
  if (backend == Fp8Backend::kEmulated) return at::mm(dequantize(a), dequantize(b).t()).to(out_dtype);
  // b^T as _scaled_mm's column-major [K, N] second operand; its rowwise scales as [1, N].
  const at::Tensor scale_b = rowwise(b) ? b.inverse_scale.t() : b.inverse_scale;
  return at::_scaled_mm(a.data, b.data.t(), a.inverse_scale, scale_b, /*bias=*/std::nullopt,
                        /*scale_result=*/std::nullopt, out_dtype, fast_accumulation);
}

}  // namespace atl::runtime
