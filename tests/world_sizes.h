// The rank counts a multi-rank case is written for. A case registered with ATOLL_RUNS_AT runs only
// where the launched world has one of them: mpi_test_main.cpp leaves it out of the other rank
// counts' runs (and says so), so no case skips for its rank count, and a skipped case fails the
// binary. Where each binary runs is its NP list in tests/mpi/tests.cmake.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace atl::test {

// SUITE.NAME -> the world sizes the case runs at (registered before main, read once by it).
inline std::map<std::string, std::vector<int>>& world_size_registry() {
  static std::map<std::string, std::vector<int>> registry;
  return registry;
}

inline bool register_world_sizes(const std::string& test, std::initializer_list<int> sizes) {
  world_size_registry()[test] = sizes;
  return true;
}

// `names` joined by `separator`.
inline std::string joined(const std::vector<std::string>& names, const std::string& separator) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : separator) + name;
  return out;
}

// The registered cases that do not run at `world_size`, as gtest filter patterns joined by ':'.
inline std::string cases_for_other_world_sizes(int world_size) {
  std::vector<std::string> patterns;
  for (const auto& [test, sizes] : world_size_registry())
    if (std::find(sizes.begin(), sizes.end(), world_size) == sizes.end()) patterns.push_back(test);
  return joined(patterns, ":");
}

// The registered names that match no case of this binary (a misspelt registration), joined by ", ".
inline std::string unknown_registered_cases() {
  std::vector<std::string> known;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s)
    for (int t = 0; t < unit.GetTestSuite(s)->total_test_count(); ++t)
      known.push_back(std::string(unit.GetTestSuite(s)->name()) + "." +
                      unit.GetTestSuite(s)->GetTestInfo(t)->name());
  std::vector<std::string> unknown;
  for (const auto& [test, sizes] : world_size_registry())
    if (std::find(known.begin(), known.end(), test) == known.end()) unknown.push_back(test);
  return joined(unknown, ", ");
}

}  // namespace atl::test

// ATOLL_RUNS_AT(Suite, Name, sizes...): the case Suite.Name runs only where the world has one of `sizes`
// ranks.
#define ATOLL_RUNS_AT(suite, name, ...)                        \
  [[maybe_unused]] const bool atoll_runs_at_##suite##_##name = \
      ::atl::test::register_world_sizes(#suite "." #name, {__VA_ARGS__})
