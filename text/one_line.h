// Error messages are one line each (the CLI prints them after "atoll: error: "), but they quote what
// a file or a user gave -- a key, a value, a tensor name, a library's own message about a damaged
// file -- which may hold line breaks and other control characters. one_line writes those as \n, \t
// or \xNN. Header-only, below every room, so every reader of files can use it.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace atl::text {

inline std::string one_line(std::string_view text) {
  std::string line;
  line.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\t') {
      line += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      line += escaped;
    } else {
      line += c;
    }
  }
  return line;
}

}  // namespace atl::text
