// `items` joined with `separator` between them: the lists that messages and tables print ("a, b,
// c"). Header-only, below every room.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace atl::text {

// Each item as `to_text(item)` returns it (a std::string), joined.
template <typename Items, typename ToText>
std::string joined(const Items& items, std::string_view separator, ToText to_text) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += to_text(item);
    first = false;
  }
  return out;
}

inline std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  return joined(items, separator, [](const std::string& item) { return item; });
}

}  // namespace atl::text
