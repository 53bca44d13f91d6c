#include "runtime/tokenizer/byte_level_alphabet.h"

#include "runtime/tokenizer/utf8.h"

namespace atl::runtime {
namespace {

bool stands_for_itself(char32_t byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

// The byte a code point of the alphabet stands for, or -1.
int byte_of(char32_t code_point) {
  if (code_point < 256) return stands_for_itself(code_point) ? static_cast<int>(code_point) : -1;
  int shifted = 0;  // bytes that do not stand for themselves, in order, map to U+0100 + their index
  for (char32_t byte = 0; byte < 256; ++byte) {
    if (stands_for_itself(byte)) continue;
    if (code_point == 0x100 + static_cast<char32_t>(shifted)) return static_cast<int>(byte);
    ++shifted;
  }
  return -1;
}

// The code point byte `byte` is written as.
char32_t code_point_of(unsigned char byte) {
  if (stands_for_itself(byte)) return byte;
  char32_t shifted = 0;
  for (char32_t b = 0; b < byte; ++b)
    if (!stands_for_itself(b)) ++shifted;
  return 0x100 + shifted;
}

void append_utf8(char32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else {  // the alphabet ends below U+0800: two bytes
    out.push_back(static_cast<char>(0xC0 | code_point >> 6));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace

std::optional<std::string> bytes_of_byte_level_text(std::string_view utf8) {
  if (invalid_utf8_offset(utf8) != std::string_view::npos) return std::nullopt;
  std::string bytes;
  for (size_t at = 0; at < utf8.size();) {
    const CodePoint c = code_point_at(utf8, at);
    const int byte = byte_of(c.value);
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
    at += c.bytes;
  }
  return bytes;
}

std::string byte_level_text(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const char byte : bytes) append_utf8(code_point_of(static_cast<unsigned char>(byte)), text);
  return text;
}

}  // namespace atl::runtime
