// FP8 on the GPU (runtime/model/fp8_tensor.h, fp8_linear.h, cuda/fp8_cast.cu): the fused amax + cast
// kernels against the composed ATen chain bit for bit (both formats, both scalings, fp32 and bf16,
// the 16-byte and the one-element paths, a tensor large enough for many blocks' atomics), saturation
// and amax = 0; at::_scaled_mm's product (cuBLASLt) against the fp64 product of the dequantized
// operands within the accumulator's and the output's rounding, printing how close it came; and
// fp8_linear's three products through _scaled_mm against the emulated backend on the same tensors.
// The products need what start-up's gate lets through (8.9+ tensorwise, 9.0+ rowwise): on an older
// GPU those cases fail, naming it (the suite's cases never skip).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "runtime/model/fp8_linear.h"
#include "runtime/model/fp8_tensor.h"

namespace {

using atl::runtime::Fp8Backend;
using atl::runtime::Fp8Format;
using atl::runtime::Fp8Scaling;
using atl::runtime::Fp8Tensor;

at::TensorOptions on_gpu(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(at::kCUDA, 0);
}

std::string name_of(Fp8Format format, Fp8Scaling scaling) {
  return std::string(format == Fp8Format::kE4M3 ? "E4M3" : "E5M2") +
         (scaling == Fp8Scaling::kRowwise ? " rowwise" : " tensorwise");
}

// Bit patterns equal; on a difference, how many and the first one.
void expect_same_bits(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  const bool fp8 = got.scalar_type() == at::kFloat8_e4m3fn || got.scalar_type() == at::kFloat8_e5m2;
  const at::Tensor a = fp8 ? got.contiguous().view(at::kByte) : got,
                   b = fp8 ? want.contiguous().view(at::kByte) : want;
  const at::Tensor differ = at::ne(a, b).reshape({-1});
  const int64_t count = differ.sum().item<int64_t>();
  if (count == 0) return;
  const int64_t first = differ.nonzero()[0][0].item<int64_t>();
  ADD_FAILURE() << what << ": " << count << " of " << differ.numel()
                << " elements differ; the first, element " << first << ": "
                << a.reshape({-1})[first].item<double>() << " against "
                << b.reshape({-1})[first].item<double>();
}

// Values over many binades (some scale into the formats' subnormals, some round to -0), exact zeros,
// signs, and the largest element placed last (the last block's to find).
at::Tensor wide_range(int64_t rows, int64_t cols, at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  const auto floats = on_gpu(at::kFloat);
  at::Tensor x = at::randn({rows, cols}, floats) * at::exp(at::rand({rows, cols}, floats) * 24 - 18);
  x.view({-1}).narrow(0, 0, std::min<int64_t>(7, rows * cols)).zero_();
  x.view({-1})[rows * cols - 1] = -91.25;
  return x.to(dtype);
}

struct CastCase {
  int64_t rows, cols;  // cols 7: the one-element path
};

TEST(Fp8CastKernel, MatchesTheComposedOpsBitForBit) {
  const std::vector<CastCase> shapes = {{256, 1024}, {5, 7}, {1, 33}, {3001, 4096}};
  for (const CastCase& s : shapes)
    for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat})
      for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2})
        for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
          const std::string what = name_of(format, scaling) + " " + c10::toString(dtype) + " [" +
                                   std::to_string(s.rows) + ", " + std::to_string(s.cols) + "]";
          const at::Tensor x = wide_range(s.rows, s.cols, dtype, 21);
          ASSERT_TRUE(atl::runtime::fp8_cast_kernel_takes(x, scaling)) << what;
          const Fp8Tensor fused = atl::runtime::quantize(x, format, scaling);
          const Fp8Tensor composed = atl::runtime::quantize_composed(x, format, scaling);
          expect_same_bits(fused.data, composed.data, what + " data");
          expect_same_bits(fused.inverse_scale, composed.inverse_scale, what + " inverse scale");
        }
}

TEST(Fp8CastKernel, SaturatesAndKeepsScaleOneForZeros) {
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const float max = atl::runtime::fp8_max(format);
    // amax * (fp8_max / amax) rounds one fp32 ulp past fp8_max for these: it lands on fp8_max.
    const float amax = format == Fp8Format::kE4M3 ? 26.979402542114258f : 25.44186019897461f;
    for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
      const at::Tensor x = at::tensor({amax, -amax, 1.0f, 0.5f}, on_gpu(at::kFloat)).view({1, 4});
      const Fp8Tensor q = atl::runtime::quantize(x, format, scaling);
      const at::Tensor values = q.data.to(at::kFloat).cpu();
      EXPECT_EQ(values[0][0].item<float>(), max) << name_of(format, scaling);
      EXPECT_EQ(values[0][1].item<float>(), -max) << name_of(format, scaling);
      const at::Tensor zeros = at::zeros({4, 64}, on_gpu(at::kBFloat16));
      const Fp8Tensor z = atl::runtime::quantize(zeros, format, scaling);
      EXPECT_TRUE(at::equal(z.inverse_scale.cpu(), at::ones_like(z.inverse_scale.cpu())))
          << name_of(format, scaling);
      EXPECT_TRUE(at::equal(z.data.view(at::kByte).cpu(), at::zeros({4, 64}, at::kByte)))
          << name_of(format, scaling);
    }
    // The recipe's cast with a scale that overshoots: +-fp8_max, never an infinity or NaN.
    const at::Tensor big = at::tensor({2 * max, -1e6f * max, max}, on_gpu(at::kFloat));
    const at::Tensor cast = atl::runtime::cast_to_fp8(big, at::ones({}, on_gpu(at::kFloat)), format);
    EXPECT_TRUE(at::equal(cast.to(at::kFloat).cpu(), at::tensor({max, -max, max})));
  }
}

// What start-up's gate says of this GPU under `scaling` (atl::runtime::fp8_unsupported_on): "" where
// the products run. The tests require what the gate lets through.
std::string unsupported(Fp8Scaling scaling) {
  const cudaDeviceProp* p = at::cuda::getCurrentDeviceProperties();
  return atl::runtime::fp8_unsupported_on(p->major, p->minor, scaling);
}

std::string device_line() {
  const cudaDeviceProp* p = at::cuda::getCurrentDeviceProperties();
  return std::string(p->name) + ", compute capability " + std::to_string(p->major) + "." +
         std::to_string(p->minor);
}

struct ProductCase {
  int64_t m, k, n;
  Fp8Format a_format;
  Fp8Scaling scaling;
  at::ScalarType out;
  bool fast_accumulation;
};

// The accumulator: Hopper's FP8 tensor cores add products in a narrower register than fp32 and
// cuBLASLt promotes the partial sums to fp32 every few k-blocks (use_fast_accum skips that); 2^-10
// of sum |a||b| is what this allows it (the fp32 bound would be K * 2^-24). The printed figure is the
// accumulator's largest error as a fraction of sum |a||b|: what the GPU measured.
TEST(Fp8Product, ScaledMmIsTheProductOfTheDequantizedOperands) {
  ASSERT_EQ(unsupported(Fp8Scaling::kTensorwise), "") << device_line();
  std::cout << device_line() << std::endl;
  const std::vector<ProductCase> cases = {
      {256, 4096, 512, Fp8Format::kE4M3, Fp8Scaling::kTensorwise, at::kBFloat16, false},
      {256, 4096, 512, Fp8Format::kE4M3, Fp8Scaling::kTensorwise, at::kBFloat16, true},
      {256, 4096, 512, Fp8Format::kE5M2, Fp8Scaling::kTensorwise, at::kBFloat16, false},
      {256, 4096, 512, Fp8Format::kE4M3, Fp8Scaling::kTensorwise, at::kFloat, false},
      {256, 4096, 512, Fp8Format::kE4M3, Fp8Scaling::kRowwise, at::kBFloat16, false},
      {256, 4096, 512, Fp8Format::kE4M3, Fp8Scaling::kRowwise, at::kBFloat16, true},
      {48, 64, 32, Fp8Format::kE4M3, Fp8Scaling::kTensorwise, at::kBFloat16, false},
      {40, 2048, 8192, Fp8Format::kE5M2, Fp8Scaling::kTensorwise, at::kBFloat16, false},
  };
  for (const ProductCase& c : cases) {
    ASSERT_EQ(unsupported(c.scaling), "") << device_line();
    at::manual_seed(31);
    const at::Tensor a = at::randn({c.m, c.k}, on_gpu(at::kBFloat16)) * 3;
    const at::Tensor b = at::randn({c.n, c.k}, on_gpu(at::kBFloat16)) * 0.02;
    const Fp8Tensor qa = atl::runtime::quantize(a, c.a_format, c.scaling);
    const Fp8Tensor qb = atl::runtime::quantize(b, Fp8Format::kE4M3, c.scaling);
    const at::Tensor got = atl::runtime::fp8_mm(qa, qb, c.out, c.fast_accumulation, Fp8Backend::kScaledMm);
    ASSERT_EQ(got.scalar_type(), c.out);
    const at::Tensor da = atl::runtime::dequantize(qa).to(at::kDouble),
                     db = atl::runtime::dequantize(qb).to(at::kDouble);
    const at::Tensor reference = at::mm(da, db.t());
    const at::Tensor magnitude = at::mm(da.abs(), db.abs().t());
    const double output_rounding = c.out == at::kBFloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -23);
    const at::Tensor error = (got.to(at::kDouble) - reference).abs();
    const at::Tensor accumulator = (error - output_rounding * reference.abs()).clamp_min(0) / magnitude;
    const at::Tensor bound = output_rounding * reference.abs() + std::ldexp(1.0, -10) * magnitude;
    const std::string what = name_of(c.a_format, c.scaling) + " x E4M3 [" + std::to_string(c.m) + ", " +
                             std::to_string(c.k) + ", " + std::to_string(c.n) + "] -> " +
                             c10::toString(c.out) + (c.fast_accumulation ? ", fast accumulation" : "");
    std::cout << "_scaled_mm " << what << ": accumulator error up to " << accumulator.max().item<double>()
              << " of sum |a||b| (2^" << std::log2(std::max(accumulator.max().item<double>(), 1e-30))
              << "), largest error / bound " << (error / bound).max().item<double>() << std::endl;
    EXPECT_TRUE((error <= bound).all().item<bool>())
        << what << ": largest excess " << (error - bound).max().item<double>();
  }
}

// fp8_linear's forward and both gradients on the GPU: through _scaled_mm against the emulation of the
// same operands (which the CPU's unit tests pin bit for bit), within the product's bound; with the
// weight cache for two microbatches, as training runs it.
TEST(Fp8Product, Fp8LinearThroughScaledMmMatchesTheEmulation) {
  ASSERT_EQ(unsupported(Fp8Scaling::kTensorwise), "") << device_line();
  for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
    ASSERT_EQ(unsupported(scaling), "") << device_line();
    at::manual_seed(41);
    const at::Tensor x0 = at::randn({4, 128, 1024}, on_gpu(at::kBFloat16));
    const at::Tensor w0 = at::randn({2816, 1024}, on_gpu(at::kBFloat16)) * 0.02;
    const at::Tensor dy = at::randn({4, 128, 2816}, on_gpu(at::kBFloat16)) * 1e-4;
    struct Run {
      at::Tensor y, dx, dw;
    };
    const auto run = [&](Fp8Backend backend, atl::runtime::Fp8WeightCache* cache, int microbatches) {
      atl::runtime::Fp8Recipe recipe = atl::runtime::Fp8Recipe::with_scaling(scaling);
      recipe.backend = backend;
      recipe.fast_accumulation_forward = false;
      const at::Tensor w = w0.clone().requires_grad_();
      Run r;
      for (int i = 0; i < microbatches; ++i) {
        const at::Tensor x = x0.clone().requires_grad_();
        const at::Tensor y = atl::runtime::fp8_linear(x, w, recipe, cache);
        y.backward(dy);
        r.y = y.detach();
        r.dx = x.grad();
      }
      r.dw = w.grad() / microbatches;
      return r;
    };
    atl::runtime::Fp8WeightCache cache(scaling);
    const Run gpu = run(Fp8Backend::kScaledMm, &cache, 2), emulated = run(Fp8Backend::kEmulated, nullptr, 1);
    EXPECT_EQ(cache.quantizations(), 1);
    const std::vector<std::pair<const char*, std::pair<at::Tensor, at::Tensor>>> products = {
        {"forward", {gpu.y, emulated.y}},
        {"input gradient", {gpu.dx, emulated.dx}},
        {"weight gradient", {gpu.dw, emulated.dw}}};
    for (const auto& [what, pair] : products) {
      const at::Tensor a = pair.first.to(at::kDouble), b = pair.second.to(at::kDouble);
      const double scale = b.abs().max().item<double>();
      const double largest = (a - b).abs().max().item<double>();
      std::cout << "fp8_linear " << (scaling == Fp8Scaling::kRowwise ? "rowwise " : "tensorwise ") << what
                << ": _scaled_mm against the emulation, largest difference " << largest << " of " << scale
                << std::endl;
      // Two bf16 roundings of results that differ by the accumulator's error: a few bf16 ulps of the scale.
      EXPECT_LE(largest, std::ldexp(1.0, -6) * scale) << what;
    }
  }
}

}  // namespace
