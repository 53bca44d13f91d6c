// completed_placement over a real world: every rank on the node is gathered, in local-rank order,
// with the CPUs its affinity allows and the GPUs it sees; a rank's threads are its CPUs over the
// ranks that may run on them. Run with mpirun --bind-to none on one host, GPUs hidden.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>

#include "comm/mpi_communicator.h"
#include "runtime/host/usable_cpus.h"
#include "runtime/placement.h"
#include "tests/mpi_test_env.h"

namespace atl::runtime {
namespace {

std::unique_ptr<comm::MpiCommunicator> world() {
  return test::MpiTestEnv::runtime().world();
}

RankPlacement from_launcher() {
  return placement_from_environment([](const char* name) { return std::getenv(name); });
}

TEST(NodePlacement, EveryRankOnTheNodeIsGatheredInLocalRankOrder) {
  const auto comm = world();
  const RankPlacement launcher = from_launcher();
  ASSERT_EQ(launcher.source, "Open MPI");
  const RankPlacement p = completed_placement(*comm, launcher);
  EXPECT_EQ(p.local_rank, launcher.local_rank);
  ASSERT_EQ(p.local_size, comm->size());  // one host
  ASSERT_EQ(static_cast<int>(p.node_ranks.size()), comm->size());
  const std::vector<int> cpus = usable_cpu_ids();
  for (const NodeRank& rank : p.node_ranks) {
    EXPECT_EQ(rank.cpus, cpus);      // --bind-to none: every rank may use the same CPUs
    EXPECT_TRUE(rank.gpus.empty());  // CUDA_VISIBLE_DEVICES= hides them
  }
  EXPECT_EQ(ranks_sharing_cpus(p.node_ranks, p.local_rank), comm->size());
  EXPECT_EQ(default_threads_per_rank(*comm, p), std::max(1, static_cast<int>(cpus.size()) / comm->size()));
  // Without the launcher's word the node communicator numbers the ranks.
  const RankPlacement counted = completed_placement(*comm, RankPlacement{});
  EXPECT_EQ(counted.local_size, comm->size());
  EXPECT_EQ(counted.local_rank, comm->rank());
  EXPECT_EQ(static_cast<int>(counted.node_ranks.size()), comm->size());
}

// Each rank on a CPU of its own, as Slurm binds tasks to their cores: no rank shares its CPUs, so
// each takes all of them rather than a share of them.
TEST(NodePlacement, RanksBoundToCpusOfTheirOwnShareNone) {
  const auto comm = world();
  const std::vector<int> cpus = usable_cpu_ids();  // the same on every rank (--bind-to none)
  if (static_cast<int>(cpus.size()) < comm->size()) GTEST_SKIP() << "fewer CPUs than ranks";
  cpu_set_t before, own;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  CPU_ZERO(&own);
  CPU_SET(cpus[static_cast<size_t>(comm->rank())], &own);
  ASSERT_EQ(sched_setaffinity(0, sizeof(own), &own), 0);
  const RankPlacement p = completed_placement(*comm, from_launcher());
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  ASSERT_EQ(static_cast<int>(p.node_ranks.size()), comm->size());
  for (int r = 0; r < comm->size(); ++r)
    EXPECT_EQ(p.node_ranks[static_cast<size_t>(r)].cpus, std::vector<int>{cpus[static_cast<size_t>(r)]});
  EXPECT_EQ(ranks_sharing_cpus(p.node_ranks, p.local_rank), 1);
  EXPECT_EQ(threads_for(p), 1);
}

}  // namespace
}  // namespace atl::runtime
