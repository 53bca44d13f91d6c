#include "runtime/data/utf8.h"

#include "runtime/tokenizer/utf8.h"

namespace atl::runtime {

size_t invalid_utf8_at(std::string_view text) {
  const size_t nul = text.find('\0');
  const size_t bad = invalid_utf8_offset(text.substr(0, nul));
  if (bad != std::string_view::npos) return bad;
  return nul == std::string_view::npos ? text.size() : nul;
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
