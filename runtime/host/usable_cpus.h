// The CPUs this process may run on: its CPU affinity (sched_getaffinity), which Slurm's cgroup
// cpuset and CPU binding, `taskset` and `numactl` narrow, and std::thread::hardware_concurrency()
// does not see (it counts the machine's CPUs); and how many of them it can keep busy, within its
// cgroup's CPU quota (cpu_quota.h). What every thread count of Atoll is sized from.
#pragma once

#include <vector>

namespace atl::runtime {

// The ids of the CPUs this process may run on, ascending; the machine's CPUs when the affinity
// cannot be read.
std::vector<int> usable_cpu_ids();

// How many CPUs this process can keep busy: those its affinity allows, within the cgroup's CPU
// quota (the smaller, rounded down), at least 1. For threads of any work.
int usable_cpus();

// The same counting physical cores, not SMT siblings (cpu_cores.h): for intra-op threads, whose
// matrix products on two siblings of a core share its FMA units.
int usable_cores();

}  // namespace atl::runtime
