// Compression codecs for the outer-optimizer exchange between islands (DiLoCo pseudo-gradients):
// each island encodes its fp32 pseudo-gradient into bytes, the bytes travel, every receiver decodes.
//
//   none  raw fp32 bytes, 4 B/element; bit-exact.
//   fp16  round-to-nearest IEEE half, 2 B/element; relative error <= 2^-11 for |x| in
//         [6.1e-5, 65504]; values that would round to Inf (|x| >= 65520) are rejected, smaller
//         ones lose relative precision as subnormals.
//   bf16  round-to-nearest bfloat16, 2 B/element; relative error <= 2^-8 (down to 1.2e-38).
//   int8  block-wise affine min/max quantization, 1 B/element + 8 B per block of kQuantBlock.
//   int4  the same with 16 levels, two codes per byte, 0.5 B/element + 8 B per block.
//
// int8/int4 (levels L = 255 / 15): per block of kQuantBlock consecutive elements (the last one may
// be shorter) lo = min, hi = max, scale = (hi - lo) / L, q = round((x - lo) / scale) clamped to
// [0, L], decoded x' = lo + q * scale. |x - x'| <= (hi - lo) / (2 L) plus a few fp32 ulps of
// max(|lo|, |hi|); a block whose elements are all equal (scale 0) decodes exactly.
// Byte layout of int8/int4, B = ceil(numel / kQuantBlock) blocks, host byte order (little-endian):
//   [0, 8 B)           header: per block, lo (fp32) then scale (fp32)
//   [8 B, end)         codes in element order; int8 one byte each, int4 two per byte (element 2i in
//                      the low nibble, 2i+1 in the high nibble; an odd tail leaves the last high
//                      nibble 0). kQuantBlock is even, so no byte straddles two blocks.
// Decoding is two separately rounded fp32 operations (q * scale, then + lo), so the same bytes
// decode to the same bits on every machine and rank.
//
// Every codec rejects NaN/Inf input: one diverged island would otherwise poison all the others.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace atl::optim::outer {

enum class Codec { kNone, kFp16, kBf16, kInt8, kInt4 };

// "none" | "fp16" | "bf16" | "int8" | "int4": how messages and outer.compression name a codec.
constexpr const char* codec_name(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kFp16:
      return "fp16";
    case Codec::kBf16:
      return "bf16";
    case Codec::kInt8:
      return "int8";
    case Codec::kInt4:
      return "int4";
  }
  return "?";
}

// Elements per quantization block of int8/int4 (each block carries its own fp32 minimum and scale).
constexpr int64_t kQuantBlock = 256;

// Bytes encode() produces for `numel` elements (none: 4*numel; fp16/bf16: 2*numel; int8: numel + 8 per
// block; int4: ceil(numel/2) + 8 per block).
int64_t encoded_bytes(Codec codec, int64_t numel);

// Encodes a 1-D fp32 tensor into a new 1-D uint8 tensor of encoded_bytes(codec, numel) bytes on the
// same device. Throws std::invalid_argument when the input holds NaN or Inf (every codec), when a
// value would round to Inf in fp16/bf16, or when one int8/int4 block spans more than FLT_MAX / 2.
at::Tensor encode(Codec codec, const at::Tensor& values);

// Decodes encode()'s bytes into a new 1-D fp32 tensor of `numel` elements. Throws
// std::invalid_argument if bytes.numel() != encoded_bytes(codec, numel) or an int8/int4 header is
// not a finite minimum with a finite, non-negative scale.
at::Tensor decode(Codec codec, const at::Tensor& bytes, int64_t numel);

}  // namespace atl::optim::outer
