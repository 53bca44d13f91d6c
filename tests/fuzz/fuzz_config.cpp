// Experiment configs: the YAML file and the `--set section.key=value` overrides. The input is the
// YAML text up to the first NUL byte, then one override per NUL-separated piece. A config that
// parses must survive the trip through config.yaml (what the run directory keeps and resume reads):
// parse_config(config_to_yaml(c)) gives the same YAML again.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void check(const std::string& yaml, const std::vector<std::string>& overrides) {
  const atl::runtime::Config config = atl::runtime::parse_config(yaml, overrides);
  const std::string saved = atl::runtime::config_to_yaml(config);
  const atl::runtime::Config reread = atl::runtime::parse_config(saved);
  if (atl::runtime::config_to_yaml(reread) != saved) {
    std::fprintf(stderr, "fuzz: config.yaml read back differently:\n%s\n", saved.c_str());
    std::abort();
  }
  for (int ranks : {1, 2, 8}) atl::runtime::validate_layout(config, ranks);
  atl::runtime::config_table(config);
  atl::runtime::island_shared_settings(config);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  for (size_t begin = 0;;) {
    const size_t end = input.find('\0', begin);
    pieces.push_back(input.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  const std::vector<std::string> overrides(pieces.begin() + 1, pieces.end());
  atl::fuzz::expect_clean([&] { check(pieces.front(), overrides); }, {atl::fuzz::Rejection::kConfigError});
  return 0;
}
