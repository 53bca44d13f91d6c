// UTF-8 as the tokenizers need it: where a text stops being valid UTF-8, and its code points.
#pragma once

#include <cstddef>
#include <string_view>

namespace atl::runtime {

// The offset of the first byte that does not begin a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points past U+10FFFF are not well-formed), or npos for valid UTF-8.
size_t invalid_utf8_offset(std::string_view text);

// The code point starting at text[at] in valid UTF-8, and its length in bytes.
struct CodePoint {
  char32_t value;
  size_t bytes;
};
inline CodePoint code_point_at(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  if (lead < 0xE0) return {static_cast<char32_t>((lead & 0x1F) << 6 | (byte(1) & 0x3F)), 2};
  if (lead < 0xF0)
    return {static_cast<char32_t>((lead & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F)), 3};
  return {static_cast<char32_t>((lead & 0x07) << 18 | (byte(1) & 0x3F) << 12 | (byte(2) & 0x3F) << 6 |
                                (byte(3) & 0x3F)),
          4};
}

}  // namespace atl::runtime
