// The rank-by-rank average of islands of different layouts (optim/outer/sliced_average.h) against
// the leader path (optim/outer/canonical_average.h) on the same values: the launched ranks form
// islands of different rank counts (3 ranks: islands of 2 and 1; 4 ranks: 2, 1 and 1), each rank
// holding a scrambled share of a canonical fragment (owned elements, replicas it only places,
// padding). Every codec gives the leader path's bits, the NoLoCo group mean too, with the same islands
// left out for their norm; the island's bytes equal the leader's and each rank of a two-rank island
// sends less than its island; tagged messages, one altered in flight, give the same bits; a diverged
// island stops every rank with the same line. The cut itself
// (optim/outer/canonical_slices.h): pieces tile the fragment, each inside one chunk, on its block grid,
// none longer than kMaxPieceElements.
#include <gtest/gtest.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <memory>
#include <numeric>
#include <vector>

#include "comm/message_authenticator.h"
#include "comm/mpi_communicator.h"
#include "optim/outer/canonical_average.h"
#include "optim/outer/canonical_slices.h"
#include "optim/outer/island_exchange.h"
#include "optim/outer/sliced_average.h"
#include "tests/mpi_test_env.h"

namespace {

namespace outer = atl::optim::outer;
using atl::comm::MpiCommunicator;

// Fragments of these canonical sizes: smaller than a block per island, and several blocks with a
// short last one.
const std::vector<int64_t> kFragmentSizes{300, 5001};

class SlicedAverage : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = atl::test::MpiTestEnv::runtime().world();
    ranks_per_island_ = world_->size() == 3 ? std::vector<int>{2, 1} : std::vector<int>{2, 1, 1};
    ASSERT_EQ(std::accumulate(ranks_per_island_.begin(), ranks_per_island_.end(), 0), world_->size());
    int first = 0;
    for (island_ = 0; first + ranks_per_island_[static_cast<size_t>(island_)] <= world_->rank(); ++island_)
      first += ranks_per_island_[static_cast<size_t>(island_)];
    local_rank_ = world_->rank() - first;
    island_ranks_ = world_->split(island_, local_rank_, "island ranks");
    // The islands' rank 0s form the leader path's group; every other rank a group of its own.
    leaders_ = world_->split(local_rank_ == 0 ? 0 : 1 + world_->rank(), island_, "islands");
    for (int64_t n : kFragmentSizes) fragments_.push_back(fragment(n));
  }

  // This rank's share of a canonical fragment of `n` elements: its island's scrambled slice of
  // owned elements, the next rank's first few as replicas it only places, and 3 padding elements.
  outer::CanonicalFragment fragment(int64_t n) {
    const int ranks = island_ranks_->size();
    at::manual_seed(7 + island_);  // the same permutation on every rank of the island
    const at::Tensor perm = at::randperm(n, at::kLong);
    const atl::comm::ShardRange own = atl::comm::shard_range(n, ranks, local_rank_);
    const atl::comm::ShardRange next = atl::comm::shard_range(n, ranks, (local_rank_ + 1) % ranks);
    const at::Tensor replicas =
        ranks > 1 ? perm.narrow(0, next.offset, std::min<int64_t>(5, next.numel)) : perm.narrow(0, 0, 0);
    outer::CanonicalFragment f;
    f.numel = n;
    f.index = at::cat({perm.narrow(0, own.offset, own.numel), at::full({3}, -1, at::kLong), replicas});
    f.owned = at::cat({at::ones({own.numel}, at::kBool), at::zeros({3 + replicas.numel()}, at::kBool)});
    return f;
  }
  at::Tensor values(int fragment) {
    at::manual_seed(40 + world_->rank());
    return at::randn({fragments_[static_cast<size_t>(fragment)].index.numel()});
  }
  bool everywhere(bool mine) {
    int value = mine ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, world_->handle());
    return value == 1;
  }

  std::shared_ptr<MpiCommunicator> world_;
  std::vector<int> ranks_per_island_;
  int island_ = 0, local_rank_ = 0;
  std::unique_ptr<MpiCommunicator> island_ranks_, leaders_;
  std::vector<outer::CanonicalFragment> fragments_;
};

TEST_F(SlicedAverage, EveryCodecGivesTheLeaderPathsBits) {
  for (outer::Codec codec : {outer::Codec::kNone, outer::Codec::kFp16, outer::Codec::kBf16,
                             outer::Codec::kInt8, outer::Codec::kInt4}) {
    outer::IslandExchange exchange(*leaders_, codec, {});
    outer::CanonicalIslandAverage leader(*island_ranks_, exchange, fragments_);
    outer::SlicedIslandAverage sliced(*island_ranks_, *world_, ranks_per_island_, codec, fragments_);
    for (int f = 0; f < static_cast<int>(kFragmentSizes.size()); ++f) {
      const at::Tensor expected = leader.average(values(f), 1.0, f);
      const at::Tensor mean = sliced.average(values(f), 1.0, f);
      EXPECT_TRUE(everywhere(mean.equal(expected))) << outer::codec_name(codec) << ", fragment " << f;
    }
  }
}

TEST_F(SlicedAverage, GroupMeansAndNormBoundsGiveTheLeaderPathsBits) {
  outer::IslandExchange exchange(*leaders_, outer::Codec::kInt4, {});
  outer::CanonicalIslandAverage leader(*island_ranks_, exchange, {fragments_[1]});
  outer::SlicedIslandAverage sliced(*island_ranks_, *world_, ranks_per_island_, outer::Codec::kInt4,
                                    {fragments_[1]});
  std::vector<int> everyone(ranks_per_island_.size());
  std::iota(everyone.begin(), everyone.end(), 0);
  const std::vector<at::Tensor> tensors{values(1), values(1).mul(2)};
  const std::vector<at::Tensor> expected = leader.group_average(tensors, everyone);
  const std::vector<at::Tensor> means = sliced.group_average(tensors, everyone);
  EXPECT_TRUE(everywhere(means[0].equal(expected[0]) && means[1].equal(expected[1])));

  // Island 1's norm is over the bound: left out of both means alike.
  leader.bound_norms(5.0);
  sliced.bound_norms(5.0);
  const double norm = island_ == 1 ? 9.0 : 1.0;
  const at::Tensor bounded = leader.average(values(1), norm, 0);
  EXPECT_TRUE(everywhere(sliced.average(values(1), norm, 0).equal(bounded)));
  ASSERT_EQ(sliced.left_out().size(), 1u);
  EXPECT_EQ(sliced.left_out()[0].island, 1);
  EXPECT_EQ(sliced.left_out()[0].norm, 9.0);
}

TEST_F(SlicedAverage, AnIslandSendsWhatItsLeaderSentAndEachRankItsShare) {
  outer::IslandExchange exchange(*leaders_, outer::Codec::kInt8, {});
  outer::CanonicalIslandAverage leader(*island_ranks_, exchange, {fragments_[1]});
  outer::SlicedIslandAverage sliced(*island_ranks_, *world_, ranks_per_island_, outer::Codec::kInt8,
                                    {fragments_[1]});
  uint64_t island_bytes = 0;
  sliced.report_island_bytes_to([&](uint64_t bytes) { island_bytes += bytes; });
  leader.average(values(1), 1.0, 0);
  sliced.average(values(1), 1.0, 0);
  uint64_t leader_bytes = exchange.bytes_sent();
  MPI_Bcast(&leader_bytes, 1, MPI_UINT64_T, 0, island_ranks_->handle());
  EXPECT_TRUE(everywhere(island_bytes == leader_bytes)) << island_bytes << " against " << leader_bytes;
  // Each of a two-rank island's ranks carries part of it (the agreements aside, about half).
  if (island_ranks_->size() == 2) {
    EXPECT_LT(sliced.bytes_sent(), leader_bytes * 3 / 4);
    EXPECT_GT(sliced.bytes_sent(), leader_bytes / 4);
  }
}

TEST_F(SlicedAverage, TaggedMessagesAndAnAlteredOneGiveTheSameBits) {
  const auto average = [&](bool tags, bool altered) {
    auto sliced = std::make_unique<outer::SlicedIslandAverage>(
        *island_ranks_, *world_, ranks_per_island_, outer::Codec::kInt4,
        std::vector<outer::CanonicalFragment>{fragments_[1]});
    if (tags)
      sliced->authenticate(
          {std::make_shared<atl::comm::MessageAuthenticator>("an island secret of 32 bytes...."),
           "test session"});
    // Island 1's ranks each alter their first message of the first exchange: its receivers reject
    // it and the exchange runs again.
    if (altered) sliced->corrupt_in_flight({1, 1});
    const at::Tensor mean = sliced->average(values(1), 1.0, 0);
    uint64_t every_rank = sliced->bytes_sent();  // what every rank sent
    MPI_Allreduce(MPI_IN_PLACE, &every_rank, 1, MPI_UINT64_T, MPI_SUM, world_->handle());
    return std::make_pair(mean, every_rank);
  };
  const auto [expected, plain_bytes] = average(false, false);
  const auto [tagged, tagged_bytes] = average(true, false);
  const auto [altered, altered_bytes] = average(true, true);
  EXPECT_TRUE(everywhere(tagged.equal(expected) && altered.equal(expected)));
  EXPECT_GT(tagged_bytes, plain_bytes);            // 32 bytes of tag per message
  EXPECT_GT(altered_bytes, tagged_bytes * 5 / 4);  // the exchange ran twice (its first try up to the check)
}

TEST_F(SlicedAverage, ADivergedIslandStopsEveryRankWithOneLine) {
  outer::SlicedIslandAverage sliced(*island_ranks_, *world_, ranks_per_island_, outer::Codec::kNone,
                                    {fragments_[1]});
  at::Tensor mine = values(1);
  if (island_ == 1) mine.fill_(std::numeric_limits<float>::quiet_NaN());
  try {
    sliced.average(mine, 1.0, 0);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("island 1 has non-finite values"), std::string::npos) << e.what();
  }
}

TEST(CanonicalSlices, PiecesTileTheFragmentInsideChunksOnTheirBlockGrid) {
  for (const int64_t n : {int64_t{7}, int64_t{300}, int64_t{5001}, int64_t{100000}, int64_t{3000001}})
    for (const std::vector<int>& ranks : {std::vector<int>{4, 1}, {2, 3, 1}, {8, 4}, {1, 1}})
      for (outer::SliceGrid grid : {outer::SliceGrid::kIslandChunks, outer::SliceGrid::kWhole}) {
        const int k = static_cast<int>(ranks.size());
        int64_t at = 0;
        for (const outer::CanonicalPiece& p : outer::canonical_pieces(n, ranks, grid)) {
          EXPECT_EQ(p.offset, at);
          EXPECT_LE(p.numel, outer::kMaxPieceElements);
          at += p.numel;
          ASSERT_EQ(p.owner.size(), ranks.size());
          for (int i = 0; i < k; ++i) {
            const std::vector<int64_t> bounds =
                outer::slice_bounds(n, ranks[static_cast<size_t>(i)], k, grid);
            const size_t r = static_cast<size_t>(p.owner[static_cast<size_t>(i)]);
            EXPECT_TRUE(bounds[r] <= p.offset && p.offset + p.numel <= bounds[r + 1]);
          }
          // The block grid the exchange quantises on starts at the piece.
          const int64_t origin =
              grid == outer::SliceGrid::kWhole ? 0 : atl::comm::shard_range(n, k, p.reducer).offset;
          EXPECT_EQ((p.offset - origin) % outer::kQuantBlock, 0) << n << " " << p.offset;
          if (grid == outer::SliceGrid::kIslandChunks) {
            const atl::comm::ShardRange chunk = atl::comm::shard_range(n, k, p.reducer);
            EXPECT_LE(p.offset + p.numel, chunk.offset + chunk.numel);
          }
        }
        EXPECT_EQ(at, n);
      }
}

}  // namespace
