// The physical cores among a process's CPUs. SMT siblings (hyper-threads) share one core's
// execution units, so matmul threads on both siblings of a core compete for the same FMA units:
// LibTorch's own default intra-op count is the physical cores (c10's defaultNumThreads), and so is
// Atoll's (docs/operations.md, "Threads", has the measurement).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace atl::runtime {

// A CPU's siblings, as /sys/devices/system/cpu/cpuN/topology/thread_siblings_list gives them
// ("0,64", "2-3"); nullopt where it cannot be read.
using SiblingsReader = std::function<std::optional<std::string>(int cpu)>;

// How many physical cores `cpus` span: CPUs with the same sibling list are one core; a CPU whose
// list cannot be read (or is empty) counts as a core of its own.
int physical_cores(const std::vector<int>& cpus, const SiblingsReader& siblings);

// physical_cores of `cpus` on this machine.
int physical_cores(const std::vector<int>& cpus);

}  // namespace atl::runtime
