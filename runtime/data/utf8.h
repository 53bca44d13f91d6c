// UTF-8 validity, for refusing input that is not text rather than tokenizing its bytes.
#pragma once

#include <cstddef>
#include <string_view>

namespace atl::runtime {

// The offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and code points above U+10FFFF included), or text.size() when all is valid. A
// sequence cut short by the end of `text` is invalid too; NUL bytes are valid UTF-8 but not text,
// and are reported as well.
size_t invalid_utf8_at(std::string_view text);

// The length of the longest prefix of `text` that ends on a character boundary (drops at most 3
// bytes of a sequence cut short at the end).
size_t utf8_boundary(std::string_view text);

}  // namespace atl::runtime
