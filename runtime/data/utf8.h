// UTF-8 validity, for refusing input that is not text rather than tokenizing its bytes.
#pragma once

#include <cstddef>
#include <string_view>

namespace atl::runtime {

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence
// (invalid_utf8_offset of runtime/tokenizer/utf8.h: overlong forms, surrogates, code points above
// U+10FFFF and a sequence cut short by the end of `text`) or is a NUL (valid UTF-8 but not text), or
// text.size() when all is valid.
size_t invalid_utf8_at(std::string_view text);

// The length of the longest prefix of `text` that ends on a character boundary (drops at most 3
// bytes of a sequence cut short at the end).
size_t utf8_boundary(std::string_view text);

}  // namespace atl::runtime
