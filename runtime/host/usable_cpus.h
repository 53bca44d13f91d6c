// The CPUs this process may run on: its CPU affinity (sched_getaffinity), which Slurm's cgroup
// cpuset and CPU binding, `taskset` and `numactl` narrow, and std::thread::hardware_concurrency()
// does not see (it counts the machine's CPUs). What every thread count of Atoll is sized from.
#pragma once

#include <vector>

namespace atl::runtime {

// The ids of the CPUs this process may run on, ascending; the machine's CPUs when the affinity
// cannot be read.
std::vector<int> usable_cpu_ids();

// How many they are, at least 1.
int usable_cpus();

}  // namespace atl::runtime
