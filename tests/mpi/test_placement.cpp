// completed_placement over a real world: every rank on the node is gathered, in local-rank order,
// with the CPUs its affinity allows and the GPUs it sees; a rank's threads are its CPUs over the
// ranks that may run on them. And the ranks' agreement on the device kind, over recorded GPU
// environments. Run with mpirun --bind-to none on one host, GPUs hidden.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>

#include "comm/mpi_communicator.h"
#include "runtime/device_agreement.h"
#include "runtime/host/usable_cpus.h"
#include "runtime/placement.h"
#include "runtime/startup.h"
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

// A rank alone on its node that sees `visible` GPUs (recorded), with no GPU variables set: what
// mpirun with a hostfile gives a node.
GpuEnvironment alone_on_node_seeing(int visible) {
  GpuEnvironment g;
  g.cuda_built = true;
  g.visible = visible;
  g.local_rank = 0;
  g.local_size = 1;
  return g;
}

// run.device auto where node-b sees no GPU: its rank falls back to the CPU while node-a's chooses
// CUDA, and every rank stops with the same line (said once by rank 0, exit 2: AgreedStartupError)
// before anything binds a device or makes a NCCL communicator.
TEST(DeviceAgreement, AutoOnANodeWithoutGpusStopsEveryRankWithOneLine) {
  const auto comm = world();
  if (comm->size() != 2) GTEST_SKIP() << "written for two ranks";
  const bool node_b = comm->rank() == 1;
  const DeviceChoice choice = choose_device(DeviceKind::kAuto, alone_on_node_seeing(node_b ? 0 : 1));
  ASSERT_EQ(choice.device.is_cuda(), !node_b);
  try {
    agree_on_device_kind(*comm, choice, node_b ? "node-b" : "node-a");
    FAIL() << "the ranks chose cuda and cpu and agreed";
  } catch (const AgreedStartupError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run.device auto chose cuda on rank 0 (node-a) and cpu on rank 1 (node-b: no CUDA device is "
              "visible to this rank); give every rank a GPU or set run.device: cpu");
  }
}

TEST(DeviceAgreement, RanksThatChoseTheSameKindGoOn) {
  const auto comm = world();
  for (int visible : {0, 1})
    EXPECT_NO_THROW(agree_on_device_kind(*comm,
                                         choose_device(DeviceKind::kAuto, alone_on_node_seeing(visible)),
                                         "node-" + std::to_string(comm->rank())));
}

}  // namespace
}  // namespace atl::runtime
