// DeviceMesh arithmetic: for every factorisation of 8 ranks into (islands, pp, dp, tp), the groups
// of each kind partition the world, and groups of different kinds are orthogonal (they share at
// most one rank), and coordinates round-trip; with cp = 2 the cp group lies in the dp group.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "comm/communicator.h"
#include "comm/mesh_shape.h"

using atl::comm::GroupKind;
using atl::comm::MeshShape;

namespace {

std::vector<MeshShape> factorisations(int world) {
  std::vector<MeshShape> shapes;
  for (int i = 1; i <= world; ++i)
    for (int p = 1; p <= world; ++p)
      for (int d = 1; d <= world; ++d)
        for (int t = 1; t <= world; ++t)
          if (i * p * d * t == world) shapes.push_back({i, p, d, t});
  return shapes;
}

int expected_size(const MeshShape& s, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return s.tp;
    case GroupKind::kDp:
      return s.dp * s.cp;
    case GroupKind::kCp:
      return s.cp;
    case GroupKind::kPp:
      return s.pp;
    case GroupKind::kIsland:
      return s.islands;
    case GroupKind::kModel:
      return s.tp * s.pp;
    case GroupKind::kEmbedding:
      return std::min(2, s.pp);
  }
  return -1;
}

const GroupKind kPartitioning[] = {GroupKind::kTp,     GroupKind::kDp,    GroupKind::kPp,
                                   GroupKind::kIsland, GroupKind::kModel, GroupKind::kCp};

}  // namespace

TEST(MeshShape, CoordinatesRoundTripWithTpFastest) {
  const MeshShape shape{2, 2, 2, 2};
  for (int r = 0; r < shape.world_size(); ++r)
    EXPECT_EQ(atl::comm::rank_of(shape, atl::comm::coord_of(shape, r)), r);
  const auto c = atl::comm::coord_of(shape, 13);  // 13 = 1 + 2*(0 + 2*(1 + 2*1))
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.island, 1);
}

TEST(MeshShape, GroupsPartitionTheWorldForEveryFactorisationOf8) {
  const auto shapes = factorisations(8);
  EXPECT_EQ(shapes.size(), 20u);  // ordered factorisations of 2^3 into 4 factors: C(6,3)
  for (const MeshShape& shape : shapes) {
    for (GroupKind kind : kPartitioning) {
      std::vector<int> seen(8, 0);
      std::set<std::vector<int>> groups;
      for (int r = 0; r < 8; ++r) {
        const auto members = atl::comm::group_members(shape, kind, r);
        ASSERT_EQ(static_cast<int>(members.size()), expected_size(shape, kind)) << shape.to_string();
        EXPECT_TRUE(std::find(members.begin(), members.end(), r) != members.end());
        EXPECT_TRUE(std::is_sorted(members.begin(), members.end()));
        groups.insert(members);
      }
      for (const auto& g : groups)
        for (int m : g) ++seen[m];
      for (int count : seen) EXPECT_EQ(count, 1) << shape.to_string() << " " << atl::comm::group_name(kind);
    }
  }
}

TEST(MeshShape, GroupsOfDifferentDimensionsAreOrthogonal) {
  const GroupKind dims[] = {GroupKind::kTp, GroupKind::kDp, GroupKind::kPp, GroupKind::kIsland};
  for (const MeshShape& shape : factorisations(8)) {
    for (int r = 0; r < 8; ++r) {
      for (GroupKind a : dims) {
        for (GroupKind b : dims) {
          if (a == b) continue;
          const auto ga = atl::comm::group_members(shape, a, r), gb = atl::comm::group_members(shape, b, r);
          std::vector<int> common;
          std::set_intersection(ga.begin(), ga.end(), gb.begin(), gb.end(), std::back_inserter(common));
          EXPECT_EQ(common, std::vector<int>{r}) << shape.to_string();
        }
      }
    }
  }
}

TEST(MeshShape, EmbeddingGroupHoldsFirstAndLastStageOnly) {
  const MeshShape shape{1, 4, 2, 1};  // ranks: pp = rank / 2
  EXPECT_EQ(atl::comm::group_members(shape, GroupKind::kEmbedding, 1), (std::vector<int>{1, 7}));
  EXPECT_TRUE(atl::comm::group_members(shape, GroupKind::kEmbedding, 3).empty());
  EXPECT_EQ(atl::comm::group_members(shape, GroupKind::kEmbedding, 6), (std::vector<int>{0, 6}));
}

TEST(MeshShape, ShardRangeCoversEveryElementOnce) {
  for (int64_t numel : {0, 1, 7, 8, 1001}) {
    for (int size : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const auto range = atl::comm::shard_range(numel, size, r);
        EXPECT_EQ(range.offset, next);
        next += range.numel;
      }
      EXPECT_EQ(next, numel);
    }
  }
}

TEST(MeshShape, ContextParallelRanksSitBetweenTpAndDpAndReduceWithDp) {
  for (const MeshShape& base : factorisations(4)) {
    const MeshShape shape{base.islands, base.pp, base.dp, base.tp, 2};
    for (int r = 0; r < shape.world_size(); ++r) {
      EXPECT_EQ(atl::comm::rank_of(shape, atl::comm::coord_of(shape, r)), r);
      // Every group kind still partitions the world.
      for (GroupKind kind : kPartitioning) {
        const auto members = atl::comm::group_members(shape, kind, r);
        ASSERT_EQ(static_cast<int>(members.size()), expected_size(shape, kind)) << shape.to_string();
        EXPECT_TRUE(std::is_sorted(members.begin(), members.end()));
      }
      // The cp group lies inside the dp (reduction) group and meets tp, pp and islands in one rank.
      const auto cp = atl::comm::group_members(shape, GroupKind::kCp, r);
      const auto dp = atl::comm::group_members(shape, GroupKind::kDp, r);
      EXPECT_TRUE(std::includes(dp.begin(), dp.end(), cp.begin(), cp.end())) << shape.to_string();
      for (GroupKind other : {GroupKind::kTp, GroupKind::kPp, GroupKind::kIsland}) {
        const auto g = atl::comm::group_members(shape, other, r);
        std::vector<int> common;
        std::set_intersection(cp.begin(), cp.end(), g.begin(), g.end(), std::back_inserter(common));
        EXPECT_EQ(common, std::vector<int>{r}) << shape.to_string();
      }
    }
  }
  // dp=2, cp=2, tp=1: cp groups [0,1] [2,3], one dp group of all four.
  const MeshShape shape{1, 1, 2, 1, 2};
  EXPECT_EQ(atl::comm::group_members(shape, GroupKind::kCp, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(atl::comm::group_members(shape, GroupKind::kDp, 2), (std::vector<int>{0, 1, 2, 3}));
}
