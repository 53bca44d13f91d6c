// Enum-like config fields. Each enum's allowed values and their YAML spellings are listed once, in
// a Choices<E> specialisation next to the enum; the parser, its error message ("is not one of ..."),
// the start-up table and the saved config.yaml all read that one list.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace atl::runtime {

// One allowed value and how YAML spells it.
template <typename E>
struct Choice {
  E value;
  std::string_view name;
};

// Specialised once per enum with `static constexpr std::array<Choice<E>, N> list`.
template <typename E>
struct Choices;

// How YAML spells `value`.
template <typename E>
constexpr std::string_view name_of(E value) {
  for (const Choice<E>& choice : Choices<E>::list)
    if (choice.value == value) return choice.name;
  return "?";  // unreachable for a value of the enum: every enumerator is listed
}

}  // namespace atl::runtime
