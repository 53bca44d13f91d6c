// The Unicode classes Llama 3's split pattern names: \p{L} (letters), \p{N} (numbers), \s
// (White_Space), at the Unicode version of the tiktoken the tests pin (unicode_classes_gen.py).
#pragma once

#include <cstdint>

namespace atl::runtime {

enum class UnicodeClass : uint8_t { kOther, kLetter, kNumber, kWhitespace };

UnicodeClass unicode_class(char32_t code_point);

}  // namespace atl::runtime
