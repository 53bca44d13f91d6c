#include "runtime/host/cpu_cores.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <set>

namespace atl::runtime {

int physical_cores(const std::vector<int>& cpus, const SiblingsReader& siblings) {
  std::set<std::string> cores;
  for (int cpu : cpus) {
    std::string list = siblings(cpu).value_or("");
    list.erase(std::remove_if(list.begin(), list.end(), [](unsigned char c) { return std::isspace(c); }),
               list.end());
    // The kernel writes one core's list identically for each of its siblings.
    cores.insert(list.empty() ? "cpu" + std::to_string(cpu) : list);
  }
  return static_cast<int>(cores.size());
}

int physical_cores(const std::vector<int>& cpus) {
  return physical_cores(cpus, [](int cpu) -> std::optional<std::string> {
    std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    if (!in) return std::nullopt;
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
}

}  // namespace atl::runtime
