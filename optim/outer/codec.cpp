#include "optim/outer/codec.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace atl::optim::outer {
namespace {

int64_t levels(Codec codec) {
  return codec == Codec::kInt8 ? 255 : 15;
}
int64_t blocks_for(int64_t numel) {
  return (numel + kQuantBlock - 1) / kQuantBlock;
}
int64_t code_bytes(Codec codec, int64_t numel) {
  return codec == Codec::kInt8 ? numel : (numel + 1) / 2;
}

// `bytes` (1-D uint8, contiguous) reinterpreted as `dtype`; copies only when the storage offset is
// misaligned for it (a caller may hand a slice of a larger receive buffer).
at::Tensor reinterpret(const at::Tensor& bytes, at::ScalarType dtype) {
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype));
  if (bytes.storage_offset() % size == 0) return bytes.view(dtype);
  return bytes.clone().view(dtype);
}

// "N <kind>values (first at element i)" for the set elements of a 1-D boolean mask; "" when none is.
std::string flagged(const at::Tensor& mask, const std::string& kind) {
  const int64_t count = mask.sum().item<int64_t>();
  if (count == 0) return "";
  const int64_t first = mask.nonzero().select(1, 0)[0].item<int64_t>();
  return std::to_string(count) + " " + kind + "values (first at element " + std::to_string(first) + ")";
}

void check_finite(Codec codec, const at::Tensor& values) {
  const std::string bad = flagged(at::isfinite(values).logical_not_(), "non-finite ");
  if (bad.empty()) return;
  throw std::invalid_argument(
      "outer exchange: " + bad + " in the " + codec_name(codec) +
      " input; the inner training diverged -- lower optim.lr or enable optim.grad_clip");
}

// `values` rounded to the 16-bit `dtype`, as bytes; rejects values that would round to Inf.
at::Tensor cast_checked(Codec codec, const at::Tensor& values, at::ScalarType dtype, const char* limit,
                        const char* alternative) {
  const at::Tensor cast = values.to(dtype);
  const std::string overflow = flagged(at::isinf(cast), "");
  if (overflow.empty()) return cast.view(at::kByte);
  throw std::invalid_argument("outer exchange: " + overflow + " exceed the " + codec_name(codec) +
                              " range |x| <= " + limit + "; use the " + alternative + " codec");
}

at::Tensor encode_quantized(Codec codec, const at::Tensor& values) {
  const int64_t numel = values.numel();
  const int64_t blocks = blocks_for(numel);
  const int64_t pad = blocks * kQuantBlock - numel;
  const double max_level = static_cast<double>(levels(codec));
  // Pad with the last element so the padding never moves the last block's minimum or maximum.
  const at::Tensor x =
      at::cat({values, values.narrow(0, numel - 1, 1).expand({pad})}).view({blocks, kQuantBlock});
  const at::Tensor lo = x.amin(1, /*keepdim=*/true);
  const at::Tensor hi = x.amax(1, /*keepdim=*/true);
  // Range in fp64: hi - lo may overflow fp32, and the decoder's lo + q * scale must stay finite.
  const at::Tensor range = hi.to(at::kDouble) - lo.to(at::kDouble);
  const double widest = range.max().item<double>();
  if (widest > std::numeric_limits<float>::max() / 2) {
    throw std::invalid_argument("outer exchange: a " + std::to_string(kQuantBlock) +
                                "-element block of the " + codec_name(codec) + " input spans " +
                                c10::str(widest) +
                                " (over FLT_MAX / 2); the inner training diverged -- lower optim.lr or "
                                "enable optim.grad_clip");
  }
  const at::Tensor scale = (range / max_level).to(at::kFloat);
  // A constant block has scale 0: dividing by 1 instead gives x - lo = 0, so q = 0 and x' = lo exactly.
  const at::Tensor divisor = at::where(scale > 0, scale, at::ones_like(scale));
  at::Tensor q = ((x - lo) / divisor).round_().clamp_(0.0, max_level).to(at::kByte).view({-1});
  q.narrow(0, numel, pad).zero_();  // canonical bytes: the int4 tail nibble is 0, not a padding code

  at::Tensor codes;
  if (codec == Codec::kInt8) {
    codes = q.narrow(0, 0, numel);
  } else {
    const at::Tensor pairs = q.view({-1, 2});
    // Low nibble first; code <= 15, so hi * 16 + lo fits a byte without overflow.
    codes = (pairs.select(1, 0) + pairs.select(1, 1) * 16).narrow(0, 0, code_bytes(codec, numel));
  }
  const at::Tensor header = at::cat({lo, scale}, 1).contiguous().view(at::kByte).view({-1});
  at::Tensor out = at::empty({encoded_bytes(codec, numel)}, values.options().dtype(at::kByte));
  out.narrow(0, 0, header.numel()).copy_(header);
  out.narrow(0, header.numel(), codes.numel()).copy_(codes);
  return out;
}

at::Tensor decode_quantized(Codec codec, const at::Tensor& bytes, int64_t numel) {
  const int64_t blocks = blocks_for(numel);
  const int64_t header_bytes = 8 * blocks;
  const at::Tensor header = reinterpret(bytes.narrow(0, 0, header_bytes), at::kFloat).view({blocks, 2});
  const at::Tensor lo = header.select(1, 0).unsqueeze(1);
  const at::Tensor scale = header.select(1, 1).unsqueeze(1);
  if (!(at::isfinite(header).all().item<bool>() && (scale >= 0).all().item<bool>())) {
    throw std::invalid_argument(std::string("outer exchange: corrupt ") + codec_name(codec) +
                                " bytes (a block header is not a finite minimum and non-negative scale)");
  }
  const at::Tensor codes = bytes.narrow(0, header_bytes, code_bytes(codec, numel));
  at::Tensor q = at::zeros({blocks * kQuantBlock}, bytes.options().dtype(at::kFloat));
  if (codec == Codec::kInt8) {
    q.narrow(0, 0, numel).copy_(codes);
  } else {
    const at::Tensor unpacked =
        at::stack({at::bitwise_and(codes, 15), at::bitwise_right_shift(codes, 4)}, 1).view({-1});
    q.narrow(0, 0, unpacked.numel()).copy_(unpacked);
  }
  // Two separately rounded ops (no fused multiply-add): the same bits on every ISA.
  const at::Tensor scaled = q.view({blocks, kQuantBlock}).mul(scale);
  return scaled.add_(lo).view({-1}).narrow(0, 0, numel).clone();
}

}  // namespace

int64_t encoded_bytes(Codec codec, int64_t numel) {
  if (numel < 0)
    throw std::invalid_argument("outer exchange: negative element count " + std::to_string(numel));
  switch (codec) {
    case Codec::kNone:
      return 4 * numel;
    case Codec::kFp16:
    case Codec::kBf16:
      return 2 * numel;
    case Codec::kInt8:
    case Codec::kInt4:
      return code_bytes(codec, numel) + 8 * blocks_for(numel);
  }
  throw std::invalid_argument("outer exchange: unknown codec");
}

at::Tensor encode(Codec codec, const at::Tensor& input) {
  if (!input.defined() || input.scalar_type() != at::kFloat || input.dim() != 1) {
    throw std::invalid_argument(std::string("outer exchange: the ") + codec_name(codec) +
                                " encoder takes a 1-D fp32 tensor");
  }
  at::NoGradGuard no_grad;
  const at::Tensor values = input.contiguous();
  check_finite(codec, values);
  if (values.numel() == 0) return at::empty({0}, values.options().dtype(at::kByte));
  switch (codec) {
    case Codec::kNone:
      return values.view(at::kByte).clone();
    case Codec::kFp16:
      return cast_checked(codec, values, at::kHalf, "65504", "bf16 or none");
    case Codec::kBf16:
      return cast_checked(codec, values, at::kBFloat16, "3.39e38", "none");
    case Codec::kInt8:
    case Codec::kInt4:
      return encode_quantized(codec, values);
  }
  throw std::invalid_argument("outer exchange: unknown codec");
}

at::Tensor decode(Codec codec, const at::Tensor& input, int64_t numel) {
  const int64_t expected = encoded_bytes(codec, numel);
  if (!input.defined() || input.scalar_type() != at::kByte || input.dim() != 1 || input.numel() != expected) {
    throw std::invalid_argument(
        std::string("outer exchange: the ") + codec_name(codec) + " decoder expects " +
        std::to_string(expected) + " bytes (1-D uint8) for " + std::to_string(numel) + " elements, got " +
        (input.defined()
             ? std::to_string(input.numel()) + " " + std::string(c10::toString(input.scalar_type()))
             : std::string("an undefined tensor")));
  }
  at::NoGradGuard no_grad;
  const at::Tensor bytes = input.contiguous();
  const at::TensorOptions fp32 = bytes.options().dtype(at::kFloat);
  if (numel == 0) return at::empty({0}, fp32);
  switch (codec) {
    case Codec::kNone:
      return reinterpret(bytes, at::kFloat).clone();
    case Codec::kFp16:
      return reinterpret(bytes, at::kHalf).to(at::kFloat);
    case Codec::kBf16:
      return reinterpret(bytes, at::kBFloat16).to(at::kFloat);
    case Codec::kInt8:
    case Codec::kInt4:
      return decode_quantized(codec, bytes, numel);
  }
  throw std::invalid_argument("outer exchange: unknown codec");
}

}  // namespace atl::optim::outer
