// DeviceMesh on real MPI groups: for every factorisation of the 8 launched ranks (cp 1 or 2), each group's
// members (gathered through the group itself) are exactly those of the mesh arithmetic, and a
// layout that does not cover the launched ranks is refused with the documented message.
#include <gtest/gtest.h>

#include <torch/torch.h>
#include <sstream>

#include "comm/device_mesh.h"
#include "comm/mpi_communicator.h"
#include "tests/mpi_test_env.h"

using atl::comm::GroupKind;

TEST(DeviceMesh, GroupsMatchMeshArithmeticForEveryFactorisation) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  const int n = world->size();
  for (int i = 1; i <= n; ++i)
    for (int p = 1; p <= n; ++p)
      for (int d = 1; d <= n; ++d)
        for (int t = 1; t <= n; ++t)
          for (int c = 1; c <= 2; ++c) {
            if (i * p * d * t * c != n) continue;
            const atl::comm::MeshShape shape{i, p, d, t, c};
            atl::comm::DeviceMesh mesh(*world, shape);
            for (GroupKind kind : {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp, GroupKind::kIsland,
                                   GroupKind::kModel, GroupKind::kEmbedding, GroupKind::kCp}) {
              const auto expected = atl::comm::group_members(shape, kind, world->rank());
              if (expected.empty()) {
                EXPECT_EQ(mesh.embedding(), nullptr);
                continue;
              }
              atl::comm::Communicator& group = mesh.group(kind);
              ASSERT_EQ(group.size(), static_cast<int>(expected.size())) << shape.to_string();
              at::Tensor mine = at::full({1}, world->rank(), at::kInt);
              at::Tensor all = at::empty({group.size()}, at::kInt);
              group.all_gather(mine, all)->wait();
              EXPECT_EQ(std::vector<int>(all.data_ptr<int>(), all.data_ptr<int>() + group.size()), expected)
                  << shape.to_string() << " " << atl::comm::group_name(kind);
            }
          }
}

TEST(DeviceMesh, RefusesALayoutThatDoesNotMatchTheRankCount) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  try {
    atl::comm::DeviceMesh mesh(*world, {1, 1, world->size() + 2, 1});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    const std::string expected = "parallel: islands*pp*dp*tp = " + std::to_string(world->size() + 2) +
                                 " but " + std::to_string(world->size()) + " ranks were launched";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(DeviceMesh, RankTableListsEveryRankWithItsPlaceOnTheNode) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  atl::comm::DeviceMesh mesh(*world, {1, 2, world->size() / 2, 1});
  // Each rank says where it runs; rank 0's table shows every rank's own words. Odd ranks name a GPU
  // (as a rank on one does: its UUID), even ones none (as on the CPU).
  const std::string device = "cpu" + std::to_string(world->rank());
  const auto gpu_of = [](int rank) {
    return rank % 2 ? "GPU-5a1c2f3e-0000-1111-2222-00000000000" + std::to_string(rank) : "";
  };
  const std::string table =
      mesh.rank_table(*world, {world->rank(), world->size(), device, gpu_of(world->rank())});
  if (world->rank() == 0) {
    std::istringstream rows(table);
    std::string row;
    std::getline(rows, row);
    EXPECT_EQ(row, "rank  host                  local  device    island  pp  dp  tp  gpu");
    for (int r = 0; r < world->size(); ++r) {
      ASSERT_TRUE(std::getline(rows, row));
      std::istringstream fields(row);
      std::string rank, host, local, dev, gpu;
      int island = -1, pp = -1, dp = -1, tp = -1;
      fields >> rank >> host >> local >> dev >> island >> pp >> dp >> tp >> gpu;
      EXPECT_EQ(rank, std::to_string(r));
      EXPECT_EQ(local, std::to_string(r) + "/" + std::to_string(world->size()));
      EXPECT_EQ(dev, "cpu" + std::to_string(r));
      EXPECT_EQ(pp, r / (world->size() / 2));  // tp innermost, then dp, then pp
      EXPECT_EQ(dp, r % (world->size() / 2));
      EXPECT_EQ(gpu, gpu_of(r));
      EXPECT_NE(row.back(), ' ');  // a CPU row ends at its last coordinate
    }
    EXPECT_FALSE(std::getline(rows, row));
  } else {
    EXPECT_TRUE(table.empty());
  }
}
