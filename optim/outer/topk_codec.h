// Top-k sparsification of the outer exchange (SparseLoCo, Sarfi et al. 2025, "Communication-
// efficient language model training scales reliably and robustly"): of every kTopkChunk
// consecutive elements of a pseudo-gradient, only the k of largest magnitude travel -- each as its
// position in the chunk (one byte) and its value, the values encoded by one of the dense codecs
// (codec.h: none keeps them exact, int8/int4 quantize them). What is left out is not lost: the
// outer optimizer keeps it as error feedback and adds it to the next round's pseudo-gradient.
//
// Selection: per chunk, the k largest |x|, ties to the lower position (a stable sort, so every
// machine keeps the same entries); the last chunk may be shorter and keeps min(k, its length).
// Byte layout for n elements, S = kept entries in all (topk_kept):
//   [0, S)       positions, one uint8 per kept entry, chunk by chunk, ascending within a chunk
//   [S, end)     encode(values codec, the S kept values in the same order)
// k = kTopkChunk keeps everything: with the codec none, decode(encode(x)) == x bit for bit.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "optim/outer/codec.h"

namespace atl::optim::outer {

// Elements per top-k chunk: a position inside one fits a byte.
constexpr int64_t kTopkChunk = 256;

struct TopkEncoding {
  int k = 0;                    // entries kept per chunk, 1 .. kTopkChunk; 0: no sparsification
  Codec values = Codec::kNone;  // how the kept values travel
  bool enabled() const { return k > 0; }
};

// Entries kept out of `numel` elements.
int64_t topk_kept(int k, int64_t numel);

// Bytes encode() produces for `numel` elements.
int64_t encoded_bytes(const TopkEncoding& encoding, int64_t numel);

// Encodes a 1-D fp32 tensor. Throws std::invalid_argument for NaN or Inf input (as every codec) or
// k outside 1 .. kTopkChunk.
at::Tensor encode(const TopkEncoding& encoding, const at::Tensor& values);

// Decodes encode()'s bytes into a new 1-D fp32 tensor of `numel` elements, zero where nothing was
// kept. Throws std::invalid_argument when the byte count is wrong or a chunk's positions are out of
// range or not strictly ascending (a message that cannot have come from encode()).
at::Tensor decode(const TopkEncoding& encoding, const at::Tensor& bytes, int64_t numel);

}  // namespace atl::optim::outer
