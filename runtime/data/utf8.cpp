#include "runtime/data/utf8.h"

namespace atl::runtime {
namespace {

// The length of the well-formed sequence starting at text[i], 0 when there is none (RFC 3629's table).
size_t sequence_at(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead >= 0x01 && lead <= 0x7f) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // NUL, a continuation byte, or a lead byte never used
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  return length;
}

}  // namespace

size_t invalid_utf8_at(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    // ASCII eight bytes at a time: most text is.
    while (i + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ull) != 0 ||
          ((word - 0x0101010101010101ull) & ~word & 0x8080808080808080ull))
        break;
      i += 8;
    }
    if (i >= text.size()) break;
    const size_t length = sequence_at(text, i);
    if (length == 0) return i;
    i += length;
  }
  return text.size();
}

size_t utf8_boundary(std::string_view text) {
  // Step back over continuation bytes to the last lead byte; keep its sequence if it is complete.
  size_t start = text.size();
  for (int back = 0; back < 4 && start > 0; ++back) {
    const auto c = static_cast<unsigned char>(text[start - 1]);
    --start;
    if ((c & 0xc0) != 0x80) {
      const size_t need = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      return text.size() - start >= need ? text.size() : start;
    }
  }
  return text.size();
}

}  // namespace atl::runtime
