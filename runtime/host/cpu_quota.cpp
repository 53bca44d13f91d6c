#include "runtime/host/cpu_quota.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

namespace atl::runtime {

namespace {

// A positive integer spelled exactly by `text`.
std::optional<long long> positive(const std::string& text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// The cgroup v2 path in /proc/self/cgroup ("0::/kubepods/pod1/c2" -> "/kubepods/pod1/c2").
std::optional<std::string> cgroup_v2_path(const std::string& proc_self_cgroup) {
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("0::/", 0) == 0) return line.substr(3);
  return std::nullopt;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::optional<double> cpu_max_limit(const std::string& cpu_max) {
  std::istringstream fields(cpu_max);
  std::string quota, period, rest;
  if (!(fields >> quota >> period) || fields >> rest) return std::nullopt;
  const std::optional<long long> q = positive(quota), p = positive(period);
  if (!q || !p) return std::nullopt;  // "max": no limit; anything else: not a limit we can read
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> cgroup_cpu_limit(const std::string& proc_self_cgroup, const FileReader& read) {
  const std::optional<std::string> path = cgroup_v2_path(proc_self_cgroup);
  if (!path) return std::nullopt;
  std::optional<double> smallest;
  // "/a/b", then "/a", then "/" (the mount's root: a container's own cgroup under a namespace).
  for (std::string cgroup = *path;; cgroup = cgroup.substr(0, std::max<size_t>(1, cgroup.rfind('/')))) {
    const std::string dir = "/sys/fs/cgroup" + (cgroup == "/" ? "" : cgroup);
    if (const std::optional<std::string> cpu_max = read(dir + "/cpu.max"))
      if (const std::optional<double> limit = cpu_max_limit(*cpu_max))
        smallest = std::min(smallest.value_or(*limit), *limit);
    if (cgroup == "/") break;
  }
  return smallest;
}

std::optional<double> process_cpu_limit() {
  const std::optional<std::string> cgroup = read_file("/proc/self/cgroup");
  return cgroup ? cgroup_cpu_limit(*cgroup, read_file) : std::nullopt;
}

int cpus_within(int cpus, std::optional<double> limit) {
  const double allowed = limit ? std::min(static_cast<double>(cpus), std::floor(*limit)) : cpus;
  return std::max(1, static_cast<int>(allowed));
}

}  // namespace atl::runtime
