// The outer-exchange codecs: round-trip error bounds, exact cases, the byte layout, and the errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "optim/outer/codec.h"

namespace {

using atl::optim::outer::Codec;
using atl::optim::outer::codec_name;
using atl::optim::outer::decode;
using atl::optim::outer::encode;
using atl::optim::outer::encoded_bytes;
using atl::optim::outer::kQuantBlock;

const std::vector<Codec> kAllCodecs = {Codec::kNone, Codec::kFp16, Codec::kBf16, Codec::kInt8, Codec::kInt4};

at::Tensor round_trip(Codec codec, const at::Tensor& values) {
  const at::Tensor bytes = encode(codec, values);
  EXPECT_EQ(bytes.scalar_type(), at::kByte);
  EXPECT_EQ(bytes.dim(), 1);
  EXPECT_EQ(bytes.numel(), encoded_bytes(codec, values.numel()));
  const at::Tensor decoded = decode(codec, bytes, values.numel());
  EXPECT_EQ(decoded.scalar_type(), at::kFloat);
  EXPECT_EQ(decoded.numel(), values.numel());
  return decoded;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == b.numel() && at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

// Every element within (hi - lo) / (2 levels) of its block's range, plus fp32 rounding slack.
// Returns the largest error seen.
double expect_within_block_bound(const at::Tensor& x, const at::Tensor& decoded, int levels) {
  const float* a = x.data_ptr<float>();
  const float* b = decoded.data_ptr<float>();
  double worst = 0.0;
  for (int64_t start = 0; start < x.numel(); start += kQuantBlock) {
    const int64_t end = std::min(start + kQuantBlock, x.numel());
    const float lo = *std::min_element(a + start, a + end);
    const float hi = *std::max_element(a + start, a + end);
    const double magnitude = std::max(std::fabs(lo), std::fabs(hi));
    const double bound = (static_cast<double>(hi) - lo) / (2.0 * levels) +
                         4 * std::numeric_limits<float>::epsilon() * magnitude;
    for (int64_t i = start; i < end; ++i) {
      const double error = std::fabs(static_cast<double>(a[i]) - b[i]);
      worst = std::max(worst, error);
      if (error > bound) {
        ADD_FAILURE() << "element " << i << " of " << x.numel() << ": " << a[i] << " decoded as " << b[i]
                      << ", error " << error << " over the block bound " << bound;
        return worst;
      }
    }
  }
  return worst;
}

int levels_of(Codec codec) {
  return codec == Codec::kInt8 ? 255 : 15;
}

TEST(OuterCodec, EncodedBytesFormulaAndTensorSize) {
  EXPECT_EQ(encoded_bytes(Codec::kNone, 1000), 4000);
  EXPECT_EQ(encoded_bytes(Codec::kFp16, 1000), 2000);
  EXPECT_EQ(encoded_bytes(Codec::kBf16, 3), 6);
  EXPECT_EQ(encoded_bytes(Codec::kInt8, 256), 256 + 8);
  EXPECT_EQ(encoded_bytes(Codec::kInt8, 257), 257 + 16);
  EXPECT_EQ(encoded_bytes(Codec::kInt4, 1), 1 + 8);
  EXPECT_EQ(encoded_bytes(Codec::kInt4, 257), 129 + 16);
  EXPECT_EQ(encoded_bytes(Codec::kInt4, 1000), 500 + 32);
  for (Codec codec : kAllCodecs) EXPECT_EQ(encoded_bytes(codec, 0), 0);
  EXPECT_THROW(encoded_bytes(Codec::kInt8, -1), std::invalid_argument);
  torch::manual_seed(1);
  for (Codec codec : kAllCodecs) {
    for (int64_t n : {0, 1, 2, 255, 256, 257, 511, 1000}) {
      const at::Tensor bytes = encode(codec, torch::randn({n}));
      EXPECT_EQ(bytes.numel(), encoded_bytes(codec, n)) << codec_name(codec) << " n=" << n;
      EXPECT_EQ(bytes.scalar_type(), at::kByte);
      EXPECT_EQ(decode(codec, bytes, n).numel(), n);
    }
  }
}

TEST(OuterCodec, NoneIsBitwise) {
  torch::manual_seed(2);
  const at::Tensor x = torch::randn({1000}) * 1e3;
  x[0] = -0.0f;
  x[1] = std::numeric_limits<float>::denorm_min();
  x[2] = std::numeric_limits<float>::max();
  x[3] = -std::numeric_limits<float>::max();
  const at::Tensor y = round_trip(Codec::kNone, x);
  EXPECT_TRUE(bitwise_equal(x, y));
  // A new tensor, not a view of the input.
  EXPECT_NE(y.data_ptr(), x.data_ptr());
}

TEST(OuterCodec, Fp16RoundToNearestWithinRelativeError) {
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({100000});
  const at::Tensor y = round_trip(Codec::kFp16, x);
  EXPECT_TRUE(bitwise_equal(y, x.to(at::kHalf).to(at::kFloat)));
  // 2^-11 relative for normal halves; subnormal halves (|x| < 6.1e-5) keep an absolute 2^-25.
  const at::Tensor excess = (x - y).abs() - (x.abs() * std::ldexp(1.0, -11) + std::ldexp(1.0, -25));
  EXPECT_LE(excess.max().item<float>(), 0.0f);
  EXPECT_LT(((x - y).abs() / x.abs().clamp_min(1e-3)).max().item<float>(), 1e-3f);
}

TEST(OuterCodec, Bf16RoundToNearestWithinRelativeError) {
  torch::manual_seed(4);
  const at::Tensor x = torch::randn({100000}) * 1e4;
  const at::Tensor y = round_trip(Codec::kBf16, x);
  EXPECT_TRUE(bitwise_equal(y, x.to(at::kBFloat16).to(at::kFloat)));
  const at::Tensor relative = (x - y).abs() / x.abs();
  EXPECT_LE(relative.max().item<float>(), std::ldexp(1.0f, -8));
  EXPECT_LT(relative.max().item<float>(), 8e-3f);
}

TEST(OuterCodec, QuantizedWithinBlockBoundForRaggedSizes) {
  torch::manual_seed(5);
  for (Codec codec : {Codec::kInt8, Codec::kInt4}) {
    for (int64_t n : {1, 2, 3, 255, 256, 257, 1000, 100000}) {
      const at::Tensor x = torch::randn({n}) * 0.01;
      const at::Tensor y = round_trip(codec, x);
      SCOPED_TRACE(std::string(codec_name(codec)) + " n=" + std::to_string(n));
      const double worst = expect_within_block_bound(x, y, levels_of(codec));
      // A random normal block spans several standard deviations: the error is real but small.
      if (n >= 1000) {
        EXPECT_GT(worst, 0.0);
        EXPECT_LT(worst, 0.01 * 8 / levels_of(codec));
      }
    }
  }
}

TEST(OuterCodec, QuantizedBlocksAreIndependent) {
  // A block of huge values must not cost precision in its neighbours.
  torch::manual_seed(6);
  at::Tensor x = torch::randn({3 * kQuantBlock}) * 1e-4;
  x.narrow(0, kQuantBlock, kQuantBlock).mul_(1e8);
  for (Codec codec : {Codec::kInt8, Codec::kInt4}) {
    const at::Tensor y = round_trip(codec, x);
    expect_within_block_bound(x, y, levels_of(codec));
    const double first_block_error = (x - y).narrow(0, 0, kQuantBlock).abs().max().item<double>();
    EXPECT_LT(first_block_error, 1e-4 * 10 / levels_of(codec)) << codec_name(codec);
  }
}

TEST(OuterCodec, AllNegativeAndOffsetInputs) {
  torch::manual_seed(7);
  const at::Tensor negative = -(torch::rand({1000}) + 0.5) * 3.0;
  const at::Tensor offset = torch::randn({777}) * 0.1 + 1000.0;
  for (Codec codec : kAllCodecs) {
    SCOPED_TRACE(codec_name(codec));
    for (const at::Tensor& x : {negative, offset}) {
      const at::Tensor y = round_trip(codec, x);
      EXPECT_TRUE(((y < 0) == (x < 0)).all().item<bool>());
      if (codec == Codec::kInt8 || codec == Codec::kInt4) {
        expect_within_block_bound(x, y, levels_of(codec));
      } else {
        EXPECT_LE(((x - y).abs() / x.abs()).max().item<float>(), 8e-3f);
      }
    }
    // The extremes of every block decode to within the bound; the minimum exactly (q = 0).
    if (codec == Codec::kInt8 || codec == Codec::kInt4) {
      const at::Tensor y = round_trip(codec, negative);
      EXPECT_EQ(y.narrow(0, 0, kQuantBlock).min().item<float>(),
                negative.narrow(0, 0, kQuantBlock).min().item<float>());
    }
  }
}

TEST(OuterCodec, AllZeroAndConstantDecodeExactly) {
  for (Codec codec : kAllCodecs) {
    SCOPED_TRACE(codec_name(codec));
    for (int64_t n : {1, 255, 257, 1000}) {
      const at::Tensor zeros = torch::zeros({n});
      EXPECT_TRUE(bitwise_equal(round_trip(codec, zeros), zeros));
      // -3.25 is exact in fp16 and bf16 too.
      const at::Tensor constant = torch::full({n}, -3.25f);
      EXPECT_TRUE(bitwise_equal(round_trip(codec, constant), constant));
    }
  }
  for (Codec codec : {Codec::kInt8, Codec::kInt4}) {
    // 0.1 is not on any coarse grid: only the scale-0 path reproduces it.
    const at::Tensor constant = torch::full({1000}, 0.1f);
    EXPECT_TRUE(bitwise_equal(round_trip(codec, constant), constant)) << codec_name(codec);
    // A constant block stays exact beside a random one.
    torch::manual_seed(8);
    at::Tensor mixed = torch::randn({2 * kQuantBlock + 10});
    mixed.narrow(0, kQuantBlock, kQuantBlock).fill_(-7.125f);
    const at::Tensor y = round_trip(codec, mixed);
    EXPECT_TRUE(
        bitwise_equal(y.narrow(0, kQuantBlock, kQuantBlock), mixed.narrow(0, kQuantBlock, kQuantBlock)))
        << codec_name(codec);
  }
}

TEST(OuterCodec, QuantizedByteLayout) {
  // 0..15 in one 16-element block: lo 0, scale 15/levels, and the codes are known exactly.
  const at::Tensor x = torch::arange(16, at::kFloat);
  for (Codec codec : {Codec::kInt8, Codec::kInt4}) {
    SCOPED_TRACE(codec_name(codec));
    const at::Tensor bytes = encode(codec, x);
    const uint8_t* raw = bytes.data_ptr<uint8_t>();
    float lo = -1.0f, scale = -1.0f;
    std::memcpy(&lo, raw, 4);
    std::memcpy(&scale, raw + 4, 4);
    EXPECT_EQ(lo, 0.0f);
    EXPECT_FLOAT_EQ(scale, 15.0f / levels_of(codec));
    if (codec == Codec::kInt4) {
      ASSERT_EQ(bytes.numel(), 8 + 8);
      // Low nibble first: element 2i in bits 0-3, element 2i+1 in bits 4-7.
      for (int i = 0; i < 8; ++i) EXPECT_EQ(raw[8 + i], (2 * i) | ((2 * i + 1) << 4)) << "byte " << i;
    } else {
      ASSERT_EQ(bytes.numel(), 8 + 16);
      for (int i = 0; i < 16; ++i) EXPECT_EQ(raw[8 + i], i * 17) << "code " << i;  // 255 / 15 = 17
    }
    // int4's scale is 1 (exact); int8's is fl(1/17), so q * scale may land one ulp off.
    EXPECT_TRUE(at::allclose(decode(codec, bytes, 16), x, /*rtol=*/1e-6, /*atol=*/0.0));
  }
  // An odd count leaves the unused high nibble of the last byte 0.
  const at::Tensor odd = encode(Codec::kInt4, torch::arange(3, at::kFloat));
  ASSERT_EQ(odd.numel(), 8 + 2);
  EXPECT_EQ(odd[9].item<uint8_t>(), 15);  // element 2 = hi: code 15, nothing above it
  // Two blocks: two headers at the front, then the codes.
  const at::Tensor two = encode(Codec::kInt8, torch::cat({torch::zeros({kQuantBlock}), torch::ones({1})}));
  ASSERT_EQ(two.numel(), 16 + kQuantBlock + 1);
  float second_lo = 0.0f;
  std::memcpy(&second_lo, two.data_ptr<uint8_t>() + 8, 4);
  EXPECT_EQ(second_lo, 1.0f);
}

TEST(OuterCodec, DecodeIsDeterministicAndAcceptsMisalignedSlices) {
  torch::manual_seed(9);
  const at::Tensor x = torch::randn({1000});
  for (Codec codec : kAllCodecs) {
    SCOPED_TRACE(codec_name(codec));
    const at::Tensor bytes = encode(codec, x);
    const at::Tensor first = decode(codec, bytes, x.numel());
    EXPECT_TRUE(bitwise_equal(first, decode(codec, bytes.clone(), x.numel())));
    // The bytes at an odd offset of a larger receive buffer.
    at::Tensor buffer = torch::zeros({bytes.numel() + 1}, at::kByte);
    buffer.narrow(0, 1, bytes.numel()).copy_(bytes);
    EXPECT_TRUE(bitwise_equal(first, decode(codec, buffer.narrow(0, 1, bytes.numel()), x.numel())));
    // Decoding neither aliases nor modifies the bytes.
    EXPECT_TRUE(at::equal(buffer.narrow(0, 1, bytes.numel()), bytes));
  }
}

TEST(OuterCodec, DecodeRejectsWrongSize) {
  const at::Tensor x = torch::randn({300});
  for (Codec codec : kAllCodecs) {
    SCOPED_TRACE(codec_name(codec));
    const at::Tensor bytes = encode(codec, x);
    EXPECT_THROW(decode(codec, bytes, 301), std::invalid_argument);
    EXPECT_THROW(decode(codec, bytes.narrow(0, 0, bytes.numel() - 1), 300), std::invalid_argument);
    EXPECT_THROW(decode(codec, torch::cat({bytes, bytes.narrow(0, 0, 1)}), 300), std::invalid_argument);
    EXPECT_THROW(decode(codec, bytes.to(at::kChar), 300), std::invalid_argument);
  }
  // Bytes of another codec have another size.
  EXPECT_THROW(decode(Codec::kInt4, encode(Codec::kInt8, x), 300), std::invalid_argument);
}

TEST(OuterCodec, DecodeRejectsCorruptHeader) {
  const at::Tensor x = torch::randn({300});
  for (Codec codec : {Codec::kInt8, Codec::kInt4}) {
    at::Tensor bytes = encode(codec, x);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data_ptr<uint8_t>() + 12, &nan, 4);  // the second block's scale
    EXPECT_THROW(decode(codec, bytes, 300), std::invalid_argument) << codec_name(codec);
  }
}

TEST(OuterCodec, NonFiniteInputThrowsForEveryCodec) {
  for (Codec codec : kAllCodecs) {
    SCOPED_TRACE(codec_name(codec));
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      at::Tensor x = torch::randn({1000});
      x[7] = bad;
      x[900] = bad;
      try {
        encode(codec, x);
        ADD_FAILURE() << "encode accepted " << bad;
      } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("non-finite"), std::string::npos) << message;
        EXPECT_NE(message.find("2 non-finite"), std::string::npos) << message;
        EXPECT_NE(message.find("element 7"), std::string::npos) << message;
        EXPECT_NE(message.find(codec_name(codec)), std::string::npos) << message;
      }
    }
    // A single element, and the last one of a ragged tail block.
    EXPECT_THROW(encode(codec, torch::full({1}, std::numeric_limits<float>::quiet_NaN())),
                 std::invalid_argument);
    at::Tensor tail = torch::randn({257});
    tail[256] = std::numeric_limits<float>::infinity();
    EXPECT_THROW(encode(codec, tail), std::invalid_argument);
  }
}

TEST(OuterCodec, RejectsValuesOutsideTheCodecRange) {
  EXPECT_THROW(encode(Codec::kFp16, torch::full({4}, 70000.0f)), std::invalid_argument);
  EXPECT_NO_THROW(encode(Codec::kFp16, torch::full({4}, 65504.0f)));
  EXPECT_THROW(encode(Codec::kBf16, torch::full({4}, std::numeric_limits<float>::max())),
               std::invalid_argument);
  const at::Tensor wide = torch::tensor({-3e38f, 3e38f});
  EXPECT_THROW(encode(Codec::kInt8, wide), std::invalid_argument);
  EXPECT_NO_THROW(encode(Codec::kNone, wide));
  // Not 1-D fp32.
  EXPECT_THROW(encode(Codec::kInt8, torch::randn({4, 4})), std::invalid_argument);
  EXPECT_THROW(encode(Codec::kInt8, torch::randn({4}, at::kDouble)), std::invalid_argument);
}

}  // namespace
