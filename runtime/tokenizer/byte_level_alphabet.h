// The byte-level alphabet of GPT-2 style tokenizers (Hugging Face's ByteLevel pre-tokenizer and
// decoder, bytes_to_unicode): every byte one printable code point, so a tokenizer.json stores its
// byte-string tokens as text. Printable ASCII and Latin-1 stand for themselves; the other 68 bytes
// for U+0100 onwards, in byte order.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace atl::runtime {

// The bytes a token written in the alphabet stands for; nullopt if a character is not in it.
std::optional<std::string> bytes_of_byte_level_text(std::string_view utf8);
// `bytes` written in the alphabet (UTF-8): what a tokenizer.json stores for a token of those bytes.
std::string byte_level_text(std::string_view bytes);

}  // namespace atl::runtime
