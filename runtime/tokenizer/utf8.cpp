#include "runtime/tokenizer/utf8.h"

namespace atl::runtime {

size_t invalid_utf8_offset(std::string_view text) {
  const auto at = [&](size_t i) { return i < text.size() ? static_cast<unsigned char>(text[i]) : 0u; };
  const auto continuation = [&](size_t i) { return (at(i) & 0xC0) == 0x80; };
  for (size_t i = 0; i < text.size();) {
    const unsigned lead = at(i);
    if (lead < 0x80) {
      ++i;
    } else if (lead >= 0xC2 && lead <= 0xDF && continuation(i + 1)) {
      i += 2;
    } else if (lead >= 0xE0 && lead <= 0xEF && continuation(i + 1) && continuation(i + 2) &&
               !(lead == 0xE0 && at(i + 1) < 0xA0) &&   // overlong
               !(lead == 0xED && at(i + 1) >= 0xA0)) {  // surrogate
      i += 3;
    } else if (lead >= 0xF0 && lead <= 0xF4 && continuation(i + 1) && continuation(i + 2) &&
               continuation(i + 3) && !(lead == 0xF0 && at(i + 1) < 0x90) &&  // overlong
               !(lead == 0xF4 && at(i + 1) >= 0x90)) {                        // past U+10FFFF
      i += 4;
    } else {
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace atl::runtime
