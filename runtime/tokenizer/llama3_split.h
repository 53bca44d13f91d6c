// Llama 3's pre-tokenizer: the pieces its split pattern cuts text into before byte-pair merging,
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// matched by hand over code points (leftmost alternative first, as tiktoken's regex does): no
// standard regex engine here has both \p{..} classes and lookahead.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace atl::runtime {

// The end (a byte offset) of the piece that starts at byte `start` < text.size() of valid UTF-8.
size_t llama3_piece_end(std::string_view text, size_t start);

// All pieces of valid UTF-8 `text`, in order.
std::vector<std::string_view> llama3_pieces(std::string_view text);

}  // namespace atl::runtime
