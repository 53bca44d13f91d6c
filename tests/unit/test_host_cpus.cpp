// What a node's CPUs give a rank's threads, over recorded files: the cgroup v2 CPU quota (cpu.max
// of the process's cgroup and those above it) against the affinity, and the physical cores among
// the CPUs where SMT siblings share a core.
#include <gtest/gtest.h>

#include <map>

#include "runtime/host/cpu_cores.h"
#include "runtime/host/cpu_quota.h"

namespace atl::runtime {
namespace {

// A recorded file system: path -> contents; anything else cannot be read.
FileReader files(std::map<std::string, std::string> contents) {
  return [contents](const std::string& path) -> std::optional<std::string> {
    const auto found = contents.find(path);
    if (found == contents.end()) return std::nullopt;
    return found->second;
  };
}

const std::string kPod = "0::/kubepods/burstable/pod7/c2\n";

TEST(CpuQuota, CpuMaxReadsAsCpus) {
  EXPECT_EQ(cpu_max_limit("200000 100000\n"), 2.0);
  EXPECT_EQ(cpu_max_limit("150000 100000"), 1.5);
  EXPECT_EQ(cpu_max_limit("50000 100000\n"), 0.5);
  EXPECT_FALSE(cpu_max_limit("max 100000\n").has_value());  // no limit
  for (const std::string malformed : {"", "\n", "200000", "200000 100000 7", "-200000 100000", "200000 0",
                                      "2e5 100000", "200000 abc", "0 100000"})
    EXPECT_FALSE(cpu_max_limit(malformed).has_value()) << malformed;
}

TEST(CpuQuota, NoQuotaLeavesTheAffinity) {
  const FileReader unlimited = files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max", "max 100000\n"}});
  EXPECT_FALSE(cgroup_cpu_limit(kPod, unlimited).has_value());
  EXPECT_EQ(cpus_within(8, cgroup_cpu_limit(kPod, unlimited)), 8);
  EXPECT_EQ(cpus_within(8, std::nullopt), 8);
}

TEST(CpuQuota, AQuotaBelowTheAffinityWins) {
  const FileReader two = files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max", "200000 100000\n"}});
  EXPECT_EQ(cgroup_cpu_limit(kPod, two), 2.0);
  EXPECT_EQ(cpus_within(64, cgroup_cpu_limit(kPod, two)), 2);
  EXPECT_EQ(cpus_within(1, cgroup_cpu_limit(kPod, two)), 1);  // the affinity is smaller
}

TEST(CpuQuota, TheSmallestLimitOnTheWayUpWins) {
  // The pod's limit on its parent, a looser one on the container, none at the root.
  const FileReader nested = files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max", "800000 100000\n"},
                                   {"/sys/fs/cgroup/kubepods/burstable/pod7/cpu.max", "300000 100000\n"},
                                   {"/sys/fs/cgroup/kubepods/burstable/cpu.max", "max 100000\n"}});
  EXPECT_EQ(cgroup_cpu_limit(kPod, nested), 3.0);
  // Inside a cgroup namespace the process's cgroup is the mount's root.
  EXPECT_EQ(cgroup_cpu_limit("0::/\n", files({{"/sys/fs/cgroup/cpu.max", "400000 100000\n"}})), 4.0);
}

TEST(CpuQuota, AFractionalQuotaRoundsDownToAtLeastOne) {
  EXPECT_EQ(
      cpus_within(16, cgroup_cpu_limit(kPod, files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max",
                                                     "250000 100000\n"}}))),
      2);
  EXPECT_EQ(cpus_within(16, 0.5), 1);
  EXPECT_EQ(cpus_within(0, std::nullopt), 1);
}

TEST(CpuQuota, AMalformedFileIsNoLimit) {
  EXPECT_FALSE(
      cgroup_cpu_limit(kPod, files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max", "two cpus\n"}}))
          .has_value());
  // ... and a readable one above it still counts.
  EXPECT_EQ(cgroup_cpu_limit(kPod, files({{"/sys/fs/cgroup/kubepods/burstable/pod7/c2/cpu.max", "garbage"},
                                          {"/sys/fs/cgroup/kubepods/cpu.max", "100000 100000"}})),
            1.0);
}

TEST(CpuQuota, CgroupV1OrNoCpuMaxIsNoLimit) {
  // cgroup v1 alone: no "0::" line (the limit would be cpu.cfs_quota_us, which this does not read).
  const std::string v1 = "4:memory:/user.slice\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice\n";
  EXPECT_FALSE(
      cgroup_cpu_limit(v1, files({{"/sys/fs/cgroup/user.slice/cpu.max", "100000 100000"}})).has_value());
  // cgroup v2 without the cpu controller: no cpu.max anywhere.
  EXPECT_FALSE(cgroup_cpu_limit(kPod, files({})).has_value());
  EXPECT_FALSE(cgroup_cpu_limit("", files({})).has_value());
}

// thread_siblings_list of a two-socket machine with 2 threads per core: cpu N and N+4 are siblings.
std::optional<std::string> smt_siblings(int cpu) {
  if (cpu < 0 || cpu > 7) return std::nullopt;
  const int core = cpu % 4;
  return std::to_string(core) + "," + std::to_string(core + 4) + "\n";
}

TEST(PhysicalCores, SmtSiblingsCountOnce) {
  EXPECT_EQ(physical_cores({0, 1, 2, 3, 4, 5, 6, 7}, smt_siblings), 4);
  EXPECT_EQ(physical_cores({0, 4}, smt_siblings), 1);        // both threads of one core
  EXPECT_EQ(physical_cores({0, 1, 2, 3}, smt_siblings), 4);  // one thread of each core
  EXPECT_EQ(physical_cores({1, 2, 5}, smt_siblings), 2);
  EXPECT_EQ(physical_cores({}, smt_siblings), 0);
}

TEST(PhysicalCores, NoSmtOrNoTopologyIsACorePerCpu) {
  const SiblingsReader alone = [](int cpu) -> std::optional<std::string> {
    return std::to_string(cpu) + "\n";
  };
  EXPECT_EQ(physical_cores({0, 1, 2}, alone), 3);
  const SiblingsReader unreadable = [](int) -> std::optional<std::string> { return std::nullopt; };
  EXPECT_EQ(physical_cores({0, 1, 2}, unreadable), 3);
  const SiblingsReader empty = [](int) -> std::optional<std::string> { return "\n"; };
  EXPECT_EQ(physical_cores({0, 1}, empty), 2);
  // The ranged form of a core's list ("2-3") is the same text on both siblings.
  const SiblingsReader ranged = [](int cpu) -> std::optional<std::string> {
    const int first = cpu - cpu % 2;
    return std::to_string(first) + "-" + std::to_string(first + 1);
  };
  EXPECT_EQ(physical_cores({0, 1, 2, 3}, ranged), 2);
}

}  // namespace
}  // namespace atl::runtime
