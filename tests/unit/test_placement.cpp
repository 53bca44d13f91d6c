// Rank placement from the launcher's environment (runtime/placement.h), over a fake environment, and
// the threads a rank takes from the CPUs it may use.
#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <string>
#include <thread>

#include "runtime/host/usable_cpus.h"
#include "runtime/placement.h"

namespace atl::runtime {
namespace {

using Variables = std::map<std::string, std::string>;

// An Environment over `vars`, which must outlive it (the returned pointers point into the map).
Environment fake(const Variables& vars) {
  return [&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Placement, OpenMpi) {
  const Variables vars = {{"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                          {"OMPI_COMM_WORLD_NODE_RANK", "3"},  // not the node index
                          {"OMPI_COMM_WORLD_RANK", "11"}};
  const RankPlacement p = placement_from_environment(fake(vars));
  EXPECT_EQ(p.source, "Open MPI");
  EXPECT_EQ(p.local_rank, 3);
  EXPECT_EQ(p.local_size, 8);
  EXPECT_EQ(p.node, -1);
}

TEST(Placement, SlurmCompressedTasksPerNode) {
  Variables vars = {{"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}};
  const Environment env = fake(vars);
  RankPlacement p = placement_from_environment(env);
  EXPECT_EQ(p.source, "Slurm");
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_size, 3);
  EXPECT_EQ(p.node, 2);

  for (const auto& [node, tasks] : std::map<std::string, int>{{"0", 4}, {"1", 4}, {"2", 3}, {"3", -1}}) {
    vars["SLURM_NODEID"] = node;
    EXPECT_EQ(placement_from_environment(env).local_size, tasks) << "node " << node;
  }
  vars["SLURM_NODEID"] = "1";
  vars["SLURM_TASKS_PER_NODE"] = "2,5(x3),1";
  EXPECT_EQ(placement_from_environment(env).local_size, 5);
  vars["SLURM_TASKS_PER_NODE"] = "8";
  vars["SLURM_NODEID"] = "0";
  EXPECT_EQ(placement_from_environment(env).local_size, 8);
}

TEST(Placement, SlurmWinsOverOpenMpiAndPmix) {
  const Variables vars = {{"SLURM_LOCALID", "0"},
                          {"SLURM_NODEID", "0"},
                          {"SLURM_TASKS_PER_NODE", "2"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                          {"PMIX_LOCAL_RANK", "1"}};
  const RankPlacement p = placement_from_environment(fake(vars));
  EXPECT_EQ(p.source, "Slurm");
  EXPECT_EQ(p.local_rank, 0);
  EXPECT_EQ(p.local_size, 2);
}

TEST(Placement, OpenMpiWinsOverPmix) {
  const Variables vars = {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                          {"PMIX_LOCAL_RANK", "5"},
                          {"PMIX_LOCAL_SIZE", "6"}};
  const RankPlacement p = placement_from_environment(fake(vars));
  EXPECT_EQ(p.source, "Open MPI");
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_size, 2);
}

TEST(Placement, Pmix) {
  const Variables vars = {{"PMIX_LOCAL_RANK", "2"}, {"PMIX_LOCAL_SIZE", "4"}, {"PMIX_RANK", "6"}};
  const RankPlacement p = placement_from_environment(fake(vars));
  EXPECT_EQ(p.source, "PMIx");
  EXPECT_EQ(p.local_rank, 2);
  EXPECT_EQ(p.local_size, 4);
  EXPECT_EQ(p.node, -1);
}

TEST(Placement, NothingSet) {
  const Variables vars = {{"PATH", "/usr/bin"}, {"SLURM_JOB_ID", "123"}};
  const RankPlacement p = placement_from_environment(fake(vars));
  EXPECT_EQ(p.source, "");
  EXPECT_EQ(p.local_rank, -1);
  EXPECT_EQ(p.local_size, -1);
  EXPECT_EQ(p.node, -1);
}

TEST(Placement, MalformedNumbersAreUnknown) {
  for (const std::string bad : {"", "x", "-1", "+2", " 2", "2 ", "2x", "1.5", "99999999999999999999"}) {
    const Variables vars = {{"OMPI_COMM_WORLD_LOCAL_RANK", bad}, {"OMPI_COMM_WORLD_LOCAL_SIZE", bad}};
    const RankPlacement p = placement_from_environment(fake(vars));
    EXPECT_EQ(p.source, "Open MPI") << "'" << bad << "'";
    EXPECT_EQ(p.local_rank, -1) << "'" << bad << "'";
    EXPECT_EQ(p.local_size, -1) << "'" << bad << "'";
  }
  // Zero ranks on a node is no size; rank 0 is a rank.
  const Variables zero = {{"PMIX_LOCAL_RANK", "0"}, {"PMIX_LOCAL_SIZE", "0"}};
  EXPECT_EQ(placement_from_environment(fake(zero)).local_rank, 0);
  EXPECT_EQ(placement_from_environment(fake(zero)).local_size, -1);
}

TEST(Placement, MalformedSlurmTasksPerNodeIsUnknown) {
  for (const std::string bad : {"", ",", "4,", ",4", "4(x2", "4(2)", "4(x)", "4(x0)", "4(x-1)", "(x2)", "0",
                                "4(x2)3", "4(x2),a", "4(x2)),3"}) {
    const Variables vars = {{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", bad}};
    const RankPlacement p = placement_from_environment(fake(vars));
    EXPECT_EQ(p.source, "Slurm") << "'" << bad << "'";
    EXPECT_EQ(p.local_rank, 0) << "'" << bad << "'";
    EXPECT_EQ(p.local_size, -1) << "'" << bad << "'";
  }
  // Without a node index the node's task count cannot be found.
  const Variables no_node = {{"SLURM_LOCALID", "0"}, {"SLURM_TASKS_PER_NODE", "4"}};
  EXPECT_EQ(placement_from_environment(fake(no_node)).local_size, -1);
  const Variables bad_node = {{"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "one"}, {"SLURM_TASKS_PER_NODE", "4"}};
  EXPECT_EQ(placement_from_environment(fake(bad_node)).node, -1);
  EXPECT_EQ(placement_from_environment(fake(bad_node)).local_size, -1);
  const Variables bad_local = {{"SLURM_LOCALID", "?"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "4"}};
  EXPECT_EQ(placement_from_environment(fake(bad_local)).source, "Slurm");
  EXPECT_EQ(placement_from_environment(fake(bad_local)).local_rank, -1);
  EXPECT_EQ(placement_from_environment(fake(bad_local)).local_size, 4);
}

TEST(Placement, GpuVariablesWhicheverLauncher) {
  const Variables slurm = {{"SLURM_LOCALID", "1"},
                           {"CUDA_VISIBLE_DEVICES", "0"},
                           {"SLURM_STEP_GPUS", "5"},
                           {"SLURM_JOB_GPUS", "4,5,6,7"}};
  const GpuVariables gpus = placement_from_environment(fake(slurm)).gpu_variables;
  EXPECT_EQ(gpus.cuda_visible_devices, "0");
  EXPECT_EQ(gpus.slurm_step_gpus, "5");
  EXPECT_EQ(gpus.slurm_job_gpus, "4,5,6,7");
  const Variables bare = {{"CUDA_VISIBLE_DEVICES", "2,3"}};
  EXPECT_EQ(placement_from_environment(fake(bare)).gpu_variables.cuda_visible_devices, "2,3");
  EXPECT_EQ(placement_from_environment(fake(bare)).gpu_variables.slurm_step_gpus, "");
}

// The ranks a rank's threads compete with: those that may run on one of its CPUs.
TEST(Placement, RanksSharingCpus) {
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<NodeRank> unbound = {
      {all, {}}, {all, {}}, {all, {}}, {all, {}}};  // mpirun --bind-to none
  EXPECT_EQ(ranks_sharing_cpus(unbound, 2), 4);
  const std::vector<NodeRank> bound = {
      {{0, 1}, {}}, {{2, 3}, {}}, {{4, 5}, {}}, {{6, 7}, {}}};  // Slurm's binding
  EXPECT_EQ(ranks_sharing_cpus(bound, 2), 1);
  const std::vector<NodeRank> halves = {
      {{0, 1, 2, 3}, {}}, {{0, 1, 2, 3}, {}}, {{3, 4}, {}}, {{5, 6, 7}, {}}};
  EXPECT_EQ(ranks_sharing_cpus(halves, 0), 3);
  EXPECT_EQ(ranks_sharing_cpus(halves, 3), 1);
  EXPECT_EQ(ranks_sharing_cpus({}, 0), 1);
  EXPECT_EQ(ranks_sharing_cpus(bound, 4), 1);
  RankPlacement placement;
  placement.local_rank = 1;
  placement.local_size = 4;
  placement.node_ranks = unbound;
  EXPECT_EQ(threads_for(placement), 2);  // 8 CPUs over 4 ranks
  placement.node_ranks = bound;
  EXPECT_EQ(threads_for(placement), 2);  // its own 2 CPUs, not 2 / 4
  placement.node_ranks = halves;
  placement.local_rank = 3;
  EXPECT_EQ(threads_for(placement), 3);
}

// What the rank's threads can keep busy (its cores within the cgroup's quota) is shared like its CPUs.
TEST(Placement, ThreadsCountComputeCpusWhereKnown) {
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  RankPlacement placement;
  placement.local_rank = 0;
  placement.local_size = 2;
  placement.node_ranks = {{all, {}}, {all, {}}};  // two ranks of one container, unbound
  EXPECT_EQ(threads_for(placement), 4);           // not read: the 8 CPUs over 2 ranks
  placement.compute_cpus = 4;                     // 4 cores (SMT siblings), or a 4-CPU quota
  EXPECT_EQ(threads_for(placement), 2);
  placement.compute_cpus = 1;
  EXPECT_EQ(threads_for(placement), 1);
  // Each bound to one core's two SMT siblings: its two CPUs are one core, shared with no rank.
  placement.node_ranks = {{{0, 4}, {}}, {{1, 5}, {}}};
  placement.compute_cpus = -1;
  EXPECT_EQ(threads_for(placement), 2);  // not read: two CPUs
  placement.compute_cpus = 1;
  EXPECT_EQ(threads_for(placement), 1);
}

// Under `taskset -c C` (here: this thread's affinity set to one CPU) a rank takes one thread, not the
// machine's count; restored after.
TEST(Placement, ThreadsFollowTheCpuAffinityNotTheMachine) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: affinity and machine agree";
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  const std::vector<int> cpus = usable_cpu_ids();
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&before));
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus.back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  const std::vector<int> pinned = usable_cpu_ids();
  RankPlacement lone;  // one rank, the node not gathered
  lone.local_rank = 0;
  lone.local_size = 1;
  const int threads = threads_for(lone);
  const int usable = usable_cpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(pinned, std::vector<int>{cpus.back()});
  EXPECT_EQ(usable, 1);
  EXPECT_EQ(threads, 1);
  EXPECT_EQ(usable_cpu_ids(), cpus);  // restored
}

TEST(Placement, ThreadsPerRank) {
  EXPECT_EQ(threads_per_rank(64, 8), 8);
  EXPECT_EQ(threads_per_rank(64, 6), 10);
  EXPECT_EQ(threads_per_rank(4, 8), 1);
  EXPECT_EQ(threads_per_rank(16, 1), 16);
  EXPECT_EQ(threads_per_rank(16, -1), 16);  // unknown: one rank on the node
  EXPECT_EQ(threads_per_rank(16, 0), 16);
  EXPECT_EQ(threads_per_rank(0, 4), 1);
}

TEST(Placement, DeviceFor) {
  EXPECT_EQ(device_for(0, 8), 0);
  EXPECT_EQ(device_for(5, 8), 5);
  EXPECT_EQ(device_for(9, 8), 1);
  EXPECT_EQ(device_for(3, 1), 0);
  EXPECT_EQ(device_for(-1, 4), 0);  // unknown local rank
  EXPECT_EQ(device_for(3, 0), 0);
}

}  // namespace
}  // namespace atl::runtime
