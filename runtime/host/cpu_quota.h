// The CPU time this process's cgroup (v2) allows it: cpu.max, which containers, Kubernetes' CPU
// limits and systemd's CPUQuota set. A quota of "200000 100000" is two CPUs' worth however many
// CPUs the affinity shows: threads beyond it only wait for their turn.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace atl::runtime {

// A file's contents by path; nullopt where it cannot be read.
using FileReader = std::function<std::optional<std::string>(const std::string& path)>;

// One cpu.max's limit in CPUs: "QUOTA PERIOD" (microseconds) is QUOTA / PERIOD ("150000 100000":
// 1.5). nullopt for "max PERIOD" (no limit) and for anything malformed.
std::optional<double> cpu_max_limit(const std::string& cpu_max);

// The CPUs the cgroup v2 of a process allows: its path is /proc/self/cgroup's "0::PATH" line
// (`proc_self_cgroup`), and the smallest limit of cpu.max in it and each cgroup above it, under
// /sys/fs/cgroup, read through `read`, wins (a container's limit may sit on a parent). nullopt where
// nothing limits it: no limit set, cgroup v1 only (no "0::" line), no cpu.max, a malformed one.
std::optional<double> cgroup_cpu_limit(const std::string& proc_self_cgroup, const FileReader& read);

// cgroup_cpu_limit of this process, over the real files.
std::optional<double> process_cpu_limit();

// The CPUs a process can keep busy: `cpus` (those its affinity allows, or their cores) and the
// cgroup's `limit`, the smaller, rounded down, at least 1.
int cpus_within(int cpus, std::optional<double> limit);

}  // namespace atl::runtime
