#include "runtime/tokenizer/unicode_classes.h"

#include <algorithm>
#include <array>

namespace atl::runtime {
namespace {

struct ClassRange {
  char32_t first;
  char32_t last;
  UnicodeClass unicode_class;
};

constexpr ClassRange kRanges[] = {
#include "runtime/tokenizer/unicode_classes_table.inc"
};

// ASCII is most text: a direct table instead of the binary search.
constexpr std::array<UnicodeClass, 128> ascii_classes() {
  std::array<UnicodeClass, 128> classes{};
  for (const ClassRange& range : kRanges)
    for (char32_t c = range.first; c <= range.last && c < 128; ++c) classes[c] = range.unicode_class;
  return classes;
}
constexpr std::array<UnicodeClass, 128> kAsciiClasses = ascii_classes();

}  // namespace

UnicodeClass unicode_class(char32_t code_point) {
  if (code_point < 128) return kAsciiClasses[code_point];
  const ClassRange* after = std::upper_bound(std::begin(kRanges), std::end(kRanges), code_point,
                                             [](char32_t c, const ClassRange& r) { return c < r.first; });
  if (after == std::begin(kRanges)) return UnicodeClass::kOther;
  const ClassRange& range = *(after - 1);
  return code_point <= range.last ? range.unicode_class : UnicodeClass::kOther;
}

}  // namespace atl::runtime
