// The message of the exception an action throws, for tests that check one-line error messages.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace atl::test {

// What `action` throws, or "no error".
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace atl::test
