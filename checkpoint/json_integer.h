// Integers from JSON files (safetensors headers, Hugging Face config.json). nlohmann-json's get<T>()
// converts whatever number it holds by a cast: a float out of T's range (1e300) is undefined
// behaviour, and a large integer wraps. Sizes, offsets and counts are read with json_integer
// instead, which takes only a JSON integer that fits T.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace atl::checkpoint {

template <typename T, typename Json>
std::optional<T> json_integer(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.template get<uint64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  } else if (value.is_number_integer()) {
    const auto v = value.template get<int64_t>();
    if (std::in_range<T>(v)) return static_cast<T>(v);
  }
  return std::nullopt;
}

// Every element of a JSON array as T, or nothing when it is not an array of such integers.
template <typename T, typename Json>
std::optional<std::vector<T>> json_integers(const Json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<T> out;
  for (const auto& element : value) {
    const std::optional<T> v = json_integer<T>(element);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

}  // namespace atl::checkpoint
