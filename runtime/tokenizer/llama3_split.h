// Llama 3's pre-tokenizer: the pieces its split pattern cuts text into before byte-pair merging,
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// matched by hand over code points (leftmost alternative first, as tiktoken's regex does): no
// standard regex engine here has both \p{..} classes and lookahead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/utf8.h"

namespace atl::runtime {

// The pattern itself, as tiktoken and tokenizer.json files write it.
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The end (a byte offset) of the piece that starts at byte `start` < text.size() of valid UTF-8.
size_t llama3_piece_end(std::string_view text, size_t start);

// All pieces of valid UTF-8 `text`, in order.
std::vector<std::string_view> llama3_pieces(std::string_view text);

// The ids of `text` through a byte-level BPE behind Llama 3's split: each piece handed to
// `encode_piece(piece, ids)`, which appends its ids. Text that is not UTF-8 is refused in one line
// naming `tokenizer` (such bytes have no reference ids: tiktoken and tokenizers take Unicode strings).
template <typename EncodePiece>
std::vector<uint32_t> encode_llama3_pieces(const std::string& text, std::string_view tokenizer,
                                           EncodePiece&& encode_piece) {
  if (const size_t bad = invalid_utf8_offset(text); bad != std::string::npos)
    throw std::invalid_argument("tokenizer: the text is not UTF-8 at byte " + std::to_string(bad) + "; " +
                                std::string(tokenizer) + " encodes Unicode text only");
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3);
  const std::string_view view = text;
  for (size_t start = 0; start < view.size();) {
    const size_t end = llama3_piece_end(view, start);
    encode_piece(view.substr(start, end - start), ids);
    start = end;
  }
  return ids;
}

}  // namespace atl::runtime
