// FP8 numerics on the CPU (runtime/model/fp8_tensor.h, fp8_linear.h): the scaling recipe against a
// quantizer written here element by element from c10's own FP8 conversions (amax, scale, the clamp
// at +-448 and +-57344, amax = 0, rowwise scales), the round trip within the error the formats'
// mantissa bits allow, the emulated product against LibTorch's CPU at::_scaled_mm (the call the GPU
// makes, with the same arguments), fp8_linear's forward and both gradients bit for bit against a
// product of hand-quantized operands, and within a bound derived from the FP8 unit roundoff of the
// fp32 layer's; the weight cache's once-a-step quantization; the model's decoder linear layers in FP8
// (and nothing else), the same under recomputation; train.precision fp8's config rules and its
// refusal on the CPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "comm/single_rank_communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/resident_storage.h"
#include "runtime/config/config.h"
#include "runtime/model/fp8_linear.h"
#include "runtime/model/fp8_tensor.h"
#include "runtime/model/llama.h"
#include "runtime/parallelize.h"

// The tests and their helpers in a namespace of their own: the unit tests compile in unity batches.
namespace fp8_unit_test {

using atl::runtime::Fp8Format;
using atl::runtime::Fp8Scaling;
using atl::runtime::Fp8Tensor;

// One element's quantization as the recipe defines it, with c10's scalar conversions (round to
// nearest even): x * scale rounded in fp32, clamped, converted.
uint8_t element_bits(float x, float scale, Fp8Format format) {
  const float max = atl::runtime::fp8_max(format);
  float y = x * scale;
  if (!std::isnan(y)) y = std::min(std::max(y, -max), max);
  return format == Fp8Format::kE4M3 ? c10::Float8_e4m3fn(y).x : c10::Float8_e5m2(y).x;
}

float element_value(uint8_t bits, Fp8Format format) {
  return format == Fp8Format::kE4M3
             ? static_cast<float>(c10::Float8_e4m3fn(bits, c10::Float8_e4m3fn::from_bits()))
             : static_cast<float>(c10::Float8_e5m2(bits, c10::Float8_e5m2::from_bits()));
}

float scale_of(float amax, Fp8Format format) {
  return amax > 0 ? atl::runtime::fp8_max(format) / std::max(amax, atl::runtime::kFp8AmaxFloor) : 1.0f;
}

// A [rows, cols] matrix quantized element by element: the bits (as the FP8 dtype) and the inverse
// scales ([] tensorwise, [rows, 1] rowwise).
Fp8Tensor hand_quantize(const at::Tensor& x_any, Fp8Format format, Fp8Scaling scaling) {
  const at::Tensor x = x_any.to(at::kFloat).contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  const float* v = x.data_ptr<float>();
  std::vector<float> scales(rows);
  float all = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(v[r * cols + c]));
    scales[r] = amax;
    all = std::max(all, amax);
  }
  for (float& s : scales) s = scale_of(scaling == Fp8Scaling::kTensorwise ? all : s, format);
  at::Tensor bits = at::empty({rows, cols}, at::kByte);
  at::Tensor inverse = at::empty({rows, 1}, at::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      bits.data_ptr<uint8_t>()[r * cols + c] = element_bits(v[r * cols + c], scales[r], format);
    inverse.data_ptr<float>()[r] = 1.0f / scales[r];
  }
  const at::Tensor data = bits.view(atl::runtime::fp8_dtype(format));
  return {data, scaling == Fp8Scaling::kTensorwise ? inverse[0][0].clone() : inverse};
}

// Each element's value times its row's inverse scale, in fp32.
at::Tensor hand_dequantize(const Fp8Tensor& t, Fp8Format format) {
  const at::Tensor bits = t.data.view(at::kByte).contiguous();
  const int64_t rows = bits.size(0), cols = bits.size(1);
  const at::Tensor inverse = t.inverse_scale.reshape({-1}).contiguous();
  at::Tensor out = at::empty({rows, cols}, at::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = inverse.data_ptr<float>()[inverse.numel() == 1 ? 0 : r];
    for (int64_t c = 0; c < cols; ++c)
      out.data_ptr<float>()[r * cols + c] = element_value(bits.data_ptr<uint8_t>()[r * cols + c], format) * s;
  }
  return out;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  if (a.scalar_type() == at::kFloat8_e4m3fn || a.scalar_type() == at::kFloat8_e5m2)
    return at::equal(a.contiguous().view(at::kByte), b.contiguous().view(at::kByte));
  return at::equal(a, b);
}

std::string name_of(Fp8Format format) {
  return format == Fp8Format::kE4M3 ? "E4M3" : "E5M2";
}

// Values over many binades, with exact zeros, signs and one large element.
at::Tensor wide_range(int64_t rows, int64_t cols, uint64_t seed) {
  at::manual_seed(seed);
  at::Tensor x = at::randn({rows, cols}) * at::exp(at::rand({rows, cols}) * 12 - 8);
  x.view({-1})[3] = 0;
  x.view({-1})[5] = 37.5;
  return x;
}

TEST(Fp8Scaling, TheScaleIsTheFormatsLargestOverTheAbsoluteMaximum) {
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const std::vector<float> amaxes = {0.0f, 1.0f, 448.0f, 3.75f, 1e-20f, 1e-12f, 6e4f, 1e30f};
    const at::Tensor amax = at::tensor(amaxes);
    const at::Tensor scale = atl::runtime::fp8_scale_from_amax(amax, format);
    for (size_t i = 0; i < amaxes.size(); ++i) {
      const float got = scale[static_cast<int64_t>(i)].item<float>();
      EXPECT_EQ(got, scale_of(amaxes[i], format)) << name_of(format) << " amax " << amaxes[i];
      EXPECT_TRUE(std::isfinite(got));
    }
    EXPECT_EQ(scale[0].item<float>(), 1.0f) << "amax 0: scale 1";
  }
  EXPECT_EQ(atl::runtime::fp8_max(Fp8Format::kE4M3), 448.0f);
  EXPECT_EQ(atl::runtime::fp8_max(Fp8Format::kE5M2), 57344.0f);
  EXPECT_EQ(static_cast<float>(std::numeric_limits<c10::Float8_e4m3fn>::max()), 448.0f);
  EXPECT_EQ(static_cast<float>(std::numeric_limits<c10::Float8_e5m2>::max()), 57344.0f);
}

TEST(Fp8Scaling, QuantizeMatchesTheRecipeElementByElement) {
  const at::Tensor x = wide_range(24, 40, 1);
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise})
      for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        const std::string what = name_of(format) +
                                 (scaling == Fp8Scaling::kRowwise ? " rowwise " : " tensorwise ") +
                                 c10::toString(dtype);
        const at::Tensor input = x.to(dtype);
        const Fp8Tensor q = atl::runtime::quantize(input, format, scaling);
        const Fp8Tensor hand = hand_quantize(input, format, scaling);
        EXPECT_EQ(q.data.scalar_type(), atl::runtime::fp8_dtype(format)) << what;
        EXPECT_TRUE(same_bits(q.data, hand.data)) << what;
        EXPECT_TRUE(same_bits(q.inverse_scale, hand.inverse_scale)) << what;
        EXPECT_EQ(q.inverse_scale.dim(), scaling == Fp8Scaling::kRowwise ? 2 : 0) << what;
        // The element of largest magnitude (of the tensor, or of each row) lands on the format's largest.
        const at::Tensor values = q.data.to(at::kFloat).abs();
        const float max = atl::runtime::fp8_max(format);
        if (scaling == Fp8Scaling::kTensorwise)
          EXPECT_EQ(values.max().item<float>(), max) << what;
        else
          EXPECT_TRUE(at::equal(values.amax({1}), at::full({x.size(0)}, max))) << what;
      }
}

TEST(Fp8Scaling, SaturationClampsToTheLargestFiniteValue) {
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const float max = atl::runtime::fp8_max(format);
    const float inf = std::numeric_limits<float>::infinity();
    const at::Tensor x = at::tensor({max, max * 1.0625f, 2 * max, 1e6f * max, inf, -2 * max, -inf, 1.0f});
    const at::Tensor q = atl::runtime::cast_to_fp8(x, at::ones({}), format).to(at::kFloat);
    EXPECT_TRUE(at::equal(q, at::tensor({max, max, max, max, max, -max, -max, 1.0f})))
        << name_of(format) << ": " << q;
    // A scale of fp8_max / amax can round amax * scale past fp8_max by an fp32 ulp; it lands on fp8_max.
    const float amax = format == Fp8Format::kE4M3 ? 26.979402542114258f : 25.44186019897461f;
    const float scale = scale_of(amax, format);
    ASSERT_GT(amax * scale, max) << "the case this checks: the product rounds past the largest value";
    const Fp8Tensor dynamic =
        atl::runtime::quantize(at::tensor({amax, -amax, 1.0f}), format, Fp8Scaling::kTensorwise);
    EXPECT_EQ(dynamic.data.to(at::kFloat)[0].item<float>(), max) << name_of(format);
    EXPECT_EQ(dynamic.data.to(at::kFloat)[1].item<float>(), -max) << name_of(format);
  }
}

TEST(Fp8Scaling, AnAllZeroTensorOrRowKeepsScaleOne) {
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const Fp8Tensor zeros = atl::runtime::quantize(at::zeros({4, 16}), format, Fp8Scaling::kTensorwise);
    EXPECT_EQ(zeros.inverse_scale.item<float>(), 1.0f);
    EXPECT_TRUE(at::equal(atl::runtime::dequantize(zeros), at::zeros({4, 16})));
    at::Tensor x = at::randn({4, 16});
    x[2].zero_();
    const Fp8Tensor rows = atl::runtime::quantize(x, format, Fp8Scaling::kRowwise);
    EXPECT_EQ(rows.inverse_scale[2][0].item<float>(), 1.0f);
    EXPECT_TRUE(at::equal(atl::runtime::dequantize(rows)[2], at::zeros({16})));
    EXPECT_NE(rows.inverse_scale[1][0].item<float>(), 1.0f);
    EXPECT_TRUE(at::isfinite(atl::runtime::dequantize(rows)).all().item<bool>());
    // The tiniest nonzero maximum: the floor keeps the scale finite.
    const Fp8Tensor tiny = atl::runtime::quantize(at::full({8}, 1e-30f), format, Fp8Scaling::kTensorwise);
    EXPECT_TRUE(std::isfinite(1.0f / tiny.inverse_scale.item<float>()));
    EXPECT_TRUE(at::isfinite(atl::runtime::dequantize(tiny)).all().item<bool>());
  }
}

// |dequantize(quantize(x)) - x| <= 2^-(m+1) |x| in the normal range, and at most half the smallest
// subnormal (in x's units: times the inverse scale) below it; plus the fp32 roundings of the scale,
// its inverse and the two products (a few ulps of fp32 relative to |x|).
TEST(Fp8Scaling, RoundTripErrorIsWithinTheFormatsRounding) {
  const at::Tensor x = wide_range(32, 64, 2);
  for (const Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
      const Fp8Tensor q = atl::runtime::quantize(x, format, scaling);
      const at::Tensor back = atl::runtime::dequantize(q).to(at::kDouble), exact = x.to(at::kDouble);
      const double u = std::ldexp(1.0, -(atl::runtime::fp8_mantissa_bits(format) + 1));
      const at::Tensor bound =
          (u + std::ldexp(1.0, -21)) * exact.abs() +
          atl::runtime::fp8_smallest_subnormal(format) / 2 * q.inverse_scale.to(at::kDouble);
      const at::Tensor error = (back - exact).abs();
      EXPECT_TRUE((error <= bound).all().item<bool>())
          << name_of(format) << ": largest excess " << (error - bound).max().item<double>();
      // The bound is the format's: the largest relative error of normal values comes close to u.
      const at::Tensor normal = exact.abs() * q.inverse_scale.to(at::kDouble).reciprocal() >=
                                std::ldexp(1.0, format == Fp8Format::kE4M3 ? -6 : -14);
      const double worst = (error / exact.abs()).masked_select(normal).max().item<double>();
      EXPECT_GT(worst, 0.75 * u) << name_of(format);
      EXPECT_LE(worst, u + std::ldexp(1.0, -21)) << name_of(format);
    }
}

// The emulation (dequantize, fp32 product, cast) against LibTorch's own CPU _scaled_mm called with the
// GPU's arguments: the same quantized operands and scales, summed in fp32 in another order. Bit for bit
// where oneDNN's CPU kernel dequantizes and multiplies in fp32 too (an AMD EPYC VM); on a CPU with
// AVX-512 FP16 (an Intel Xeon VM) it accumulates in its own order, up to 1.1e-5 apart here. Bound: K
// fp32 additions in any order (K 2^-24 of the sum of |a_i b_i|), and one bf16 rounding each side.
TEST(Fp8Product, TheEmulationAgreesWithLibTorchsScaledMmOnTheCpu) {
  at::manual_seed(3);
  const int64_t k = 64;
  const at::Tensor a = at::randn({48, k}) * 3, b = at::randn({32, k});
  for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise})
    for (const Fp8Format a_format : {Fp8Format::kE4M3, Fp8Format::kE5M2})
      for (const at::ScalarType out : {at::kFloat, at::kBFloat16}) {
        if (scaling == Fp8Scaling::kRowwise && out == at::kFloat) continue;  // refused, as on the GPU
        const Fp8Tensor qa = atl::runtime::quantize(a, a_format, scaling);
        const Fp8Tensor qb = atl::runtime::quantize(b, Fp8Format::kE4M3, scaling);
        const at::Tensor emulated =
            atl::runtime::fp8_mm(qa, qb, out, false, atl::runtime::Fp8Backend::kEmulated);
        const at::Tensor scaled_mm =
            atl::runtime::fp8_mm(qa, qb, out, false, atl::runtime::Fp8Backend::kScaledMm);
        ASSERT_EQ(emulated.sizes(), (std::vector<int64_t>{48, 32}));
        EXPECT_EQ(emulated.scalar_type(), out);
        const at::Tensor abs_products = at::mm(atl::runtime::dequantize(qa).abs().to(at::kDouble),
                                               atl::runtime::dequantize(qb).abs().to(at::kDouble).t());
        at::Tensor bound = abs_products * (static_cast<double>(k) * std::ldexp(1.0, -24));
        if (out == at::kBFloat16) bound = bound + scaled_mm.to(at::kDouble).abs() * std::ldexp(1.0, -7);
        const at::Tensor difference = (emulated.to(at::kDouble) - scaled_mm.to(at::kDouble)).abs();
        EXPECT_TRUE((difference <= bound).all().item<bool>())
            << name_of(a_format) << (scaling == Fp8Scaling::kRowwise ? " rowwise " : " tensorwise ")
            << c10::toString(out) << ": largest excess " << (difference - bound).max().item<double>();
      }
}

TEST(Fp8Product, RefusesWhatCublasLtCannotTake) {
  const auto quantized = [](int64_t rows, int64_t cols, Fp8Format format, Fp8Scaling scaling) {
    return atl::runtime::quantize(at::randn({rows, cols}), format, scaling);
  };
  const auto refusal = [](const Fp8Tensor& a, const Fp8Tensor& b, atl::runtime::Fp8Backend backend,
                          at::ScalarType out = at::kBFloat16) {
    try {
      atl::runtime::fp8_mm(a, b, out, false, backend);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  using atl::runtime::Fp8Backend;
  const Fp8Tensor k20 = quantized(16, 20, Fp8Format::kE4M3, Fp8Scaling::kTensorwise);
  // Every backend refuses what the GPU's call cannot take: a CPU run is the GPU's call.
  for (const Fp8Backend backend : {Fp8Backend::kScaledMm, Fp8Backend::kEmulated}) {
    EXPECT_NE(refusal(k20, k20, backend).find("K a multiple of 16"), std::string::npos);
    const Fp8Tensor n8 = quantized(8, 32, Fp8Format::kE4M3, Fp8Scaling::kTensorwise);
    const Fp8Tensor m8 = quantized(8, 32, Fp8Format::kE4M3, Fp8Scaling::kTensorwise);
    EXPECT_NE(refusal(m8, n8, backend).find("N a multiple of 16"), std::string::npos);
    const Fp8Tensor e5 = quantized(16, 32, Fp8Format::kE5M2, Fp8Scaling::kTensorwise);
    EXPECT_NE(refusal(e5, e5, backend).find("E5M2 x E5M2"), std::string::npos);
    const Fp8Tensor by_row = quantized(16, 32, Fp8Format::kE4M3, Fp8Scaling::kRowwise);
    EXPECT_EQ(refusal(by_row, by_row, backend, at::kFloat),
              "fp8_mm: a rowwise-scaled product's output must be bf16 (a [16, 32], b [16, 32])");
    EXPECT_EQ(refusal(by_row, by_row, backend), "");
    Fp8Tensor double_scale = quantized(16, 32, Fp8Format::kE4M3, Fp8Scaling::kTensorwise);
    double_scale.inverse_scale = double_scale.inverse_scale.to(at::kDouble);
    EXPECT_NE(refusal(double_scale, double_scale, backend).find("scales must be contiguous fp32"),
              std::string::npos);
    Fp8Tensor strided_scale = by_row;
    strided_scale.inverse_scale = at::cat({by_row.inverse_scale, by_row.inverse_scale}, 1).narrow(1, 0, 1);
    EXPECT_NE(refusal(strided_scale, by_row, backend).find("scales must be contiguous fp32"),
              std::string::npos);
  }
  const Fp8Tensor rows = quantized(16, 32, Fp8Format::kE4M3, Fp8Scaling::kRowwise);
  const Fp8Tensor whole = quantized(16, 32, Fp8Format::kE4M3, Fp8Scaling::kTensorwise);
  EXPECT_NE(refusal(rows, whole, Fp8Backend::kEmulated).find("scaled tensorwise or both rowwise"),
            std::string::npos);
  EXPECT_THROW(atl::runtime::transposed(rows), std::invalid_argument);
}

struct LinearCase {
  Fp8Scaling scaling;
  Fp8Format gradient;
  at::ScalarType dtype;
};

std::string name_of(const LinearCase& c) {
  return std::string(c.scaling == Fp8Scaling::kRowwise ? "rowwise" : "tensorwise") + ", gradients " +
         name_of(c.gradient) + ", " + c10::toString(c.dtype);
}

const std::vector<LinearCase>& linear_cases() {
  static const std::vector<LinearCase> cases = {{Fp8Scaling::kTensorwise, Fp8Format::kE5M2, at::kFloat},
                                                {Fp8Scaling::kTensorwise, Fp8Format::kE4M3, at::kFloat},
                                                {Fp8Scaling::kTensorwise, Fp8Format::kE5M2, at::kBFloat16},
                                                {Fp8Scaling::kRowwise, Fp8Format::kE4M3, at::kBFloat16},
                                                {Fp8Scaling::kRowwise, Fp8Format::kE5M2, at::kBFloat16}};
  return cases;
}

// The layer's inputs: x [batch, seq, in], W [out, in], an upstream gradient dy [batch, seq, out].
struct LinearInputs {
  at::Tensor x, weight, dy;
};

LinearInputs linear_inputs(at::ScalarType dtype) {
  at::manual_seed(4);
  return {(at::randn({3, 16, 64}) * 2).to(dtype), (at::randn({32, 64}) * 0.05).to(dtype),
          (at::randn({3, 16, 32}) * 1e-3).to(dtype)};
}

struct LinearResults {
  at::Tensor y, dx, dw;
};

LinearResults run_fp8_linear(const LinearInputs& in, const atl::runtime::Fp8Recipe& recipe,
                             atl::runtime::Fp8WeightCache* cache = nullptr) {
  const at::Tensor x = in.x.clone().requires_grad_(), weight = in.weight.clone().requires_grad_();
  const at::Tensor y = atl::runtime::fp8_linear(x, weight, recipe, cache);
  y.backward(in.dy);
  return {y.detach(), x.grad(), weight.grad()};
}

// The three products from hand-quantized operands, each a @ b^T with K innermost as fp8_mm takes them.
LinearResults hand_products(const LinearInputs& in, const LinearCase& c) {
  const Fp8Format e4m3 = Fp8Format::kE4M3, g = c.gradient;
  const at::Tensor x = in.x.reshape({-1, 64}), dy = in.dy.reshape({-1, 32});
  const auto product = [](const at::Tensor& a, const at::Tensor& b, at::ScalarType out) {
    return at::mm(a, b.t()).to(out);
  };
  const Fp8Tensor xq = hand_quantize(x, e4m3, c.scaling), wq = hand_quantize(in.weight, e4m3, c.scaling);
  const Fp8Tensor dyq = hand_quantize(dy, g, c.scaling);
  LinearResults r;
  r.y = product(hand_dequantize(xq, e4m3), hand_dequantize(wq, e4m3), c.dtype).view({3, 16, 32});
  if (c.scaling == Fp8Scaling::kTensorwise) {
    // A transpose is the same FP8 values transposed, with the same scale.
    const auto t = [](const Fp8Tensor& q) { return Fp8Tensor{q.data.t().contiguous(), q.inverse_scale}; };
    r.dx = product(hand_dequantize(dyq, g), hand_dequantize(t(wq), e4m3), c.dtype).view({3, 16, 64});
    r.dw = product(hand_dequantize(t(dyq), g), hand_dequantize(t(xq), e4m3), c.dtype);
  } else {
    const Fp8Tensor wtq = hand_quantize(in.weight.t().contiguous(), e4m3, c.scaling);
    r.dx = product(hand_dequantize(dyq, g), hand_dequantize(wtq, e4m3), c.dtype).view({3, 16, 64});
    r.dw = product(hand_dequantize(hand_quantize(dy.t().contiguous(), g, c.scaling), g),
                   hand_dequantize(hand_quantize(x.t().contiguous(), e4m3, c.scaling), e4m3), c.dtype);
  }
  return r;
}

atl::runtime::Fp8Recipe recipe_of(const LinearCase& c) {
  atl::runtime::Fp8Recipe recipe = atl::runtime::Fp8Recipe::with_scaling(c.scaling);
  recipe.gradient_format = c.gradient;
  return recipe;
}

// The largest |got - exact| can be for a @ b^T with each operand quantized: per element of an
// operand e = u |v| + half the smallest subnormal times its inverse scale (plus fp32 roundings of
// the dequantization), so |a~ b~ - a b| <= (|a| + e_a)(|b| + e_b) - |a||b| summed over K; the fp32
// accumulation adds K ulps of the sum of |a~ b~|, and the result's rounding one of its own.
at::Tensor error_bound(const at::Tensor& a, const at::Tensor& a_inverse, Fp8Format a_format,
                       const at::Tensor& b, const at::Tensor& b_inverse, Fp8Format b_format,
                       const at::Tensor& exact) {
  const auto widened = [](const at::Tensor& v, const at::Tensor& inverse, Fp8Format format) {
    const double u = std::ldexp(1.0, -(atl::runtime::fp8_mantissa_bits(format) + 1)) + std::ldexp(1.0, -21);
    const at::Tensor abs = v.to(at::kDouble).abs();
    return abs + u * abs + atl::runtime::fp8_smallest_subnormal(format) / 2 * inverse.to(at::kDouble);
  };
  const at::Tensor wide = at::mm(widened(a, a_inverse, a_format), widened(b, b_inverse, b_format).t());
  const at::Tensor plain = at::mm(a.to(at::kDouble).abs(), b.to(at::kDouble).abs().t());
  const double fp32_ulp = std::ldexp(1.0, -24);
  return wide - plain + static_cast<double>(a.size(1)) * fp32_ulp * wide + fp32_ulp * exact.abs();
}

// The emulated fp8_linear (the CPU's backend) forward and both gradients through autograd, bit for
// bit the products of operands quantized here element by element.
TEST(Fp8Linear, ForwardAndGradientsAreTheProductsOfTheQuantizedOperands) {
  for (const LinearCase& c : linear_cases()) {
    const LinearInputs in = linear_inputs(c.dtype);
    const LinearResults got = run_fp8_linear(in, recipe_of(c));
    const LinearResults want = hand_products(in, c);
    EXPECT_EQ(got.y.scalar_type(), c.dtype);
    EXPECT_EQ(got.dw.scalar_type(), c.dtype);
    EXPECT_TRUE(same_bits(got.y, want.y)) << name_of(c) << ": forward";
    EXPECT_TRUE(same_bits(got.dx, want.dx)) << name_of(c) << ": input gradient";
    EXPECT_TRUE(same_bits(got.dw, want.dw)) << name_of(c) << ": weight gradient";
  }
}

// Against at::linear's exact values (fp64, unquantized): every element within the bound the FP8
// unit roundoffs give (error_bound), for the forward and both gradients.
TEST(Fp8Linear, ResultsAreWithinTheFp8RoundingOfTheExactProducts) {
  for (const LinearCase& c : linear_cases()) {
    if (c.dtype != at::kFloat) continue;  // fp32 results: no bf16 rounding on top
    const LinearInputs in = linear_inputs(c.dtype);
    const LinearResults got = run_fp8_linear(in, recipe_of(c));
    const at::Tensor x = in.x.reshape({-1, 64}).to(at::kDouble), w = in.weight.to(at::kDouble);
    const at::Tensor dy = in.dy.reshape({-1, 32}).to(at::kDouble);
    const auto inverse_of = [&](const at::Tensor& v, Fp8Format f) {
      return atl::runtime::quantize(v.to(at::kFloat).contiguous(), f, c.scaling).inverse_scale;
    };
    const Fp8Format e4m3 = Fp8Format::kE4M3, g = c.gradient;
    struct Check {
      const char* what;
      at::Tensor a;
      Fp8Format a_format;
      at::Tensor b;
      Fp8Format b_format;
      at::Tensor got;
    };
    const std::vector<Check> checks = {
        {"forward", x, e4m3, w, e4m3, got.y.reshape({-1, 32})},
        {"input gradient", dy, g, w.t().contiguous(), e4m3, got.dx.reshape({-1, 64})},
        {"weight gradient", dy.t().contiguous(), g, x.t().contiguous(), e4m3, got.dw},
    };
    for (const Check& k : checks) {
      const at::Tensor exact = at::mm(k.a, k.b.t());
      // Tensorwise, a transposed operand has its tensor's scale: the scale of the operand itself.
      const at::Tensor bound = error_bound(k.a, inverse_of(k.a, k.a_format), k.a_format, k.b,
                                           inverse_of(k.b, k.b_format), k.b_format, exact);
      const at::Tensor error = (k.got.to(at::kDouble) - exact).abs();
      EXPECT_TRUE((error <= bound).all().item<bool>())
          << name_of(c) << ", " << k.what << ": largest excess " << (error - bound).max().item<double>();
      std::cout << "fp8_linear " << name_of(c) << ", " << k.what << ": largest error "
                << error.max().item<double>() << ", largest error / bound "
                << (error / bound).max().item<double>() << ", relative to the exact product's scale "
                << error.max().item<double>() / exact.abs().max().item<double>() << std::endl;
    }
  }
}

TEST(Fp8Linear, ProductGivenIsReturnedWithTheSameBackward) {
  const LinearCase c{Fp8Scaling::kTensorwise, Fp8Format::kE5M2, at::kFloat};
  const LinearInputs in = linear_inputs(c.dtype);
  const LinearResults computed = run_fp8_linear(in, recipe_of(c));
  const at::Tensor x = in.x.clone().requires_grad_(), weight = in.weight.clone().requires_grad_();
  const at::Tensor kept = computed.y.clone();
  const at::Tensor y = atl::runtime::fp8_linear(x, weight, recipe_of(c), nullptr, kept);
  EXPECT_TRUE(same_bits(y.detach(), kept));
  y.backward(in.dy);
  EXPECT_TRUE(same_bits(x.grad(), computed.dx));
  EXPECT_TRUE(same_bits(weight.grad(), computed.dw));
}

// Either gradient alone (a frozen weight, or an input that needs none): the same values as with both.
TEST(Fp8Linear, EachGradientAloneIsTheSame) {
  for (const LinearCase& c : linear_cases()) {
    const LinearInputs in = linear_inputs(c.dtype);
    const LinearResults both = run_fp8_linear(in, recipe_of(c));
    const at::Tensor x = in.x.clone().requires_grad_(), weight = in.weight.clone().requires_grad_();
    atl::runtime::fp8_linear(x, in.weight, recipe_of(c)).backward(in.dy);
    atl::runtime::fp8_linear(in.x, weight, recipe_of(c)).backward(in.dy);
    EXPECT_TRUE(same_bits(x.grad(), both.dx)) << name_of(c);
    EXPECT_TRUE(same_bits(weight.grad(), both.dw)) << name_of(c);
  }
}

// Four microbatches of one step: each weight quantized once, its transpose made once, the results
// those of quantizing at every use; an in-place update (the optimizer's) or start_step quantizes anew.
// Under ZeRO-3 a unit's values are freed after use: its FP8 operands go with them (at the next
// quantization), so the cache holds about the units gathered, not the whole model.
TEST(Fp8WeightCache, DropsTheOperandsOfAWeightWhoseStorageWasFreed) {
  atl::runtime::Fp8WeightCache cache(Fp8Scaling::kTensorwise);
  const at::Tensor a = at::randn({32, 64}), b = at::randn({32, 64});
  cache.forward_operand(a);
  EXPECT_EQ(cache.entries(), 1u);
  atl::parallel::release_storage(a);  // as ZeRO-3 releases a unit
  cache.forward_operand(b);
  EXPECT_EQ(cache.entries(), 1u) << "a's FP8 operands outlived its values";
  EXPECT_EQ(cache.quantizations(), 2);
}

TEST(Fp8WeightCache, QuantizesEachWeightOnceAStep) {
  for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
    const atl::runtime::Fp8Recipe recipe = atl::runtime::Fp8Recipe::with_scaling(scaling);
    // Rowwise products come out in bf16 only (as on the GPU).
    const LinearInputs in = linear_inputs(scaling == Fp8Scaling::kRowwise ? at::kBFloat16 : at::kFloat);
    const LinearResults uncached = run_fp8_linear(in, recipe);
    atl::runtime::Fp8WeightCache cache(scaling);
    const at::Tensor weight = in.weight.clone().requires_grad_();
    at::Tensor accumulated;
    for (int microbatch = 0; microbatch < 4; ++microbatch) {
      const at::Tensor x = in.x.clone().requires_grad_();
      // As a recomputed region reads it: an alias of the parameter's storage.
      const at::Tensor w = microbatch % 2 ? weight.detach().requires_grad_() : weight;
      const at::Tensor y = atl::runtime::fp8_linear(x, w, recipe, &cache);
      y.backward(in.dy);
      EXPECT_TRUE(same_bits(y.detach(), uncached.y));
      EXPECT_TRUE(same_bits(x.grad(), uncached.dx));
      if (microbatch % 2) {
        EXPECT_TRUE(same_bits(w.grad(), uncached.dw));
      }
    }
    EXPECT_EQ(cache.quantizations(), 1);
    EXPECT_EQ(cache.transposes(), 1);
    EXPECT_EQ(cache.entries(), 1u);
    EXPECT_TRUE(same_bits(weight.grad(), uncached.dw * 2));
    {
      at::NoGradGuard no_grad;
      weight.mul_(2);  // the version counter moves: the cached operands are stale
    }
    const at::Tensor doubled = atl::runtime::fp8_linear(in.x, weight, recipe, &cache);
    EXPECT_EQ(cache.quantizations(), 2);
    EXPECT_FALSE(same_bits(doubled.detach(), uncached.y));
    cache.start_step();
    EXPECT_EQ(cache.entries(), 0u);
    atl::runtime::fp8_linear(in.x, weight, recipe, &cache);
    EXPECT_EQ(cache.quantizations(), 3);
    EXPECT_THROW(atl::runtime::fp8_linear(
                     in.x, weight,
                     atl::runtime::Fp8Recipe::with_scaling(
                         scaling == Fp8Scaling::kRowwise ? Fp8Scaling::kTensorwise : Fp8Scaling::kRowwise),
                     &cache),
                 std::invalid_argument);
  }
}

TEST(Fp8Linear, TheRecipesDefaultGradientFormatFollowsTheScaling) {
  EXPECT_EQ(atl::runtime::Fp8Recipe{}.gradient_format, Fp8Format::kE5M2);
  EXPECT_EQ(atl::runtime::Fp8Recipe::with_scaling(Fp8Scaling::kTensorwise).gradient_format, Fp8Format::kE5M2);
  EXPECT_EQ(atl::runtime::Fp8Recipe::with_scaling(Fp8Scaling::kRowwise).gradient_format, Fp8Format::kE4M3);
}

// A two-layer model on the CPU (the emulated products), one microbatch's loss and the flat gradients.
struct ModelRun {
  at::Tensor loss, grads;
  size_t cached_weights = 0;
};

ModelRun run_model(atl::runtime::Recompute recompute, bool fp8) {
  atl::runtime::ModelConfig config;
  config.vocab = 64;
  config.dim = 32;
  config.layers = 2;
  config.heads = 2;
  config.kv_heads = 1;
  config.ffn = 64;
  config.seq = 16;
  atl::parallel::FlatParameters params(atl::runtime::LlamaModel::param_infos(config), at::kFloat);
  atl::runtime::initialize_parameters(config, 7, params);
  atl::comm::SingleRankCommunicator tp("tp");
  atl::runtime::Fp8Linears linears(atl::runtime::Fp8Recipe::with_scaling(Fp8Scaling::kTensorwise));
  const atl::runtime::LlamaModel model(config, params, tp, false, {}, nullptr, {}, recompute, nullptr,
                                       fp8 ? &linears : nullptr);
  at::manual_seed(8);
  const at::Tensor tokens = at::randint(0, config.vocab, {3, config.seq});
  const at::Tensor targets = at::randint(0, config.vocab, {3, config.seq});
  params.zero_grads();
  const at::Tensor loss = model.loss(tokens, targets);
  loss.backward();
  return {loss.detach(), params.grads().clone(), linears.cache().entries()};
}

// Each decoder layer's seven linear weights (q, k, v, o, gate, up, down) go through FP8 -- one cache
// entry each -- and nothing else does (the embedding and the head stay out); a recomputed layer
// reruns the same FP8 products, so the loss and every gradient are those without recomputation, bit
// for bit; and the model stays close to the fp32 one.
TEST(Fp8Model, TheDecoderLinearLayersRunInFp8) {
  using atl::runtime::Recompute;
  const ModelRun fp8 = run_model(Recompute::kNone, true);
  EXPECT_EQ(fp8.cached_weights, 2u * 7u);
  for (const Recompute recompute : {Recompute::kSelective, Recompute::kFull}) {
    const ModelRun again = run_model(recompute, true);
    EXPECT_TRUE(same_bits(again.loss, fp8.loss)) << name_of(recompute);
    EXPECT_TRUE(same_bits(again.grads, fp8.grads)) << name_of(recompute);
    EXPECT_EQ(again.cached_weights, 2u * 7u) << name_of(recompute);
  }
  const ModelRun fp32 = run_model(Recompute::kNone, false);
  EXPECT_EQ(fp32.cached_weights, 0u);
  EXPECT_FALSE(same_bits(fp8.loss, fp32.loss));
  const double loss_error = std::abs(fp8.loss.item<double>() / fp32.loss.item<double>() - 1);
  const double grad_error = ((fp8.grads - fp32.grads).norm() / fp32.grads.norm()).item<double>();
  std::cout << "two-layer model, FP8 against fp32: loss " << fp8.loss.item<double>() << " against "
            << fp32.loss.item<double>() << ", gradient error " << grad_error << " of its norm" << std::endl;
  EXPECT_LT(loss_error, 0.01);
  EXPECT_LT(grad_error, 0.1);
}

std::vector<std::string> layout_problems(const std::vector<std::string>& overrides) {
  return atl::runtime::validate_layout(atl::runtime::parse_config("", overrides), 1);
}

bool has_line(const std::vector<std::string>& problems, const std::string& line) {
  return std::find(problems.begin(), problems.end(), line) != problems.end();
}

TEST(Fp8Config, PrecisionFp8AndItsRules) {
  const atl::runtime::Config fp8 = atl::runtime::parse_config("", {"train.precision=fp8"});
  EXPECT_EQ(fp8.train.precision, atl::runtime::Precision::kFp8);
  EXPECT_EQ(atl::runtime::storage_precision(fp8.train.precision), atl::runtime::Precision::kBf16);
  EXPECT_EQ(atl::runtime::element_bytes(fp8.train.precision), 2);
  EXPECT_EQ(atl::runtime::parse_config("", {"train.fp8_scaling=rowwise"}).train.fp8_scaling,
            Fp8Scaling::kRowwise);
  EXPECT_TRUE(layout_problems({"train.precision=fp8"}).empty());
  EXPECT_TRUE(
      has_line(layout_problems({"train.precision=fp8", "kernels.fused_weight_grad=true"}),
               "config: kernels.fused_weight_grad = true cannot apply with train.precision = fp8 (the FP8 "
               "weight gradient reaches the buffer through autograd); set it to auto or false, or "
               "train.precision to bf16"));
  // fp8 is a compute precision only: no choice of parallel.reduce_dtype.
  try {
    atl::runtime::parse_config("", {"parallel.reduce_dtype=fp8"});
    ADD_FAILURE() << "parallel.reduce_dtype = fp8 parsed";
  } catch (const atl::runtime::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.reduce_dtype = 'fp8' is not one of fp32, bf16;"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(
      has_line(layout_problems({"train.precision=fp8", "model.ffn=680", "parallel.tp=1"}),
               "config: train.precision = fp8 needs every decoder linear layer's widths on a tp rank to be "
               "multiples of 16 (cuBLASLt's FP8 products); model.ffn / parallel.tp = 680 is not; change "
               "the model's shape or parallel.tp, or set train.precision: bf16"));
  EXPECT_TRUE(
      has_line(layout_problems({"train.precision=fp8", "model.seq=24", "train.global_batch=1"}),
               "config: train.precision = fp8 needs a microbatch's tokens (train.global_batch / "
               "(parallel.islands*parallel.dp*parallel.microbatches) * model.seq = 24) to be a multiple "
               "of 16 (the FP8 weight-gradient product sums over them); change model.seq or the batch "
               "split, or set train.precision: bf16"));
  EXPECT_TRUE(layout_problems({"model.ffn=680"}).empty()) << "bf16 and fp32 take any width";
}

// On the CPU fp8 is one line naming the setting, the value and the fix (atoll train exits 2 with it).
// The compute-capability rule start-up, the GPU tests and docs/gpu.md share: tensorwise from Ada
// (8.9), rowwise from Hopper (9.0), nothing before Ada.
TEST(Fp8Config, TheComputeCapabilityGate) {
  using atl::runtime::fp8_unsupported_on;
  EXPECT_EQ(fp8_unsupported_on(8, 6, Fp8Scaling::kTensorwise),
            "compute capability 8.6 has no FP8 tensor cores (8.9+)");
  EXPECT_EQ(fp8_unsupported_on(8, 9, Fp8Scaling::kTensorwise), "");
  EXPECT_EQ(
      fp8_unsupported_on(8, 9, Fp8Scaling::kRowwise),
      "compute capability 8.9 runs tensorwise FP8 products only (LibTorch's rowwise kernel is Hopper's, "
      "9.0+)");
  for (const Fp8Scaling scaling : {Fp8Scaling::kTensorwise, Fp8Scaling::kRowwise}) {
    EXPECT_EQ(fp8_unsupported_on(9, 0, scaling), "");
    EXPECT_EQ(fp8_unsupported_on(10, 0, scaling), "");
    EXPECT_NE(fp8_unsupported_on(7, 5, scaling), "");
  }
}

TEST(Fp8Config, RefusedOnTheCpuWithOneLine) {
  const atl::runtime::Config fp8 = atl::runtime::parse_config("", {"train.precision=fp8"});
  try {
    atl::runtime::resolve_kernels(fp8, c10::Device(c10::kCPU));
    ADD_FAILURE() << "train.precision fp8 resolved on the CPU";
  } catch (const atl::runtime::ConfigError& e) {
    EXPECT_EQ(e.problems(),
              std::vector<std::string>{"config: train.precision = fp8 needs a GPU with FP8 tensor cores "
                                       "(compute capability 8.9+ tensorwise, 9.0+ rowwise, through "
                                       "LibTorch's _scaled_mm); this rank runs on the CPU; set "
                                       "train.precision: bf16"});
  }
  // On a GPU, kernels.fused_weight_grad's auto stays off under fp8, and the start-up line says why.
  atl::runtime::KernelLevers levers;
  levers.fused_adamw = levers.fused_clip = levers.first_grad_copy = true;
  EXPECT_EQ(
      atl::runtime::kernels_line(fp8, levers),
      "kernels: fused_adamw on (auto), fused_clip on (auto), first_grad_copy on (auto), fused_weight_grad "
      "off (auto: train.precision = fp8)");
}

}  // namespace fp8_unit_test
