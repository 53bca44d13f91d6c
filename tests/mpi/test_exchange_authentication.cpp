// The outer exchange with the job secret (optim/outer/island_exchange.h), every launched rank one
// island: tagged messages give bit for bit the untagged exchange's means; a chunk altered in flight
// (the corrupt_in_flight hook) is caught by its HMAC at its receiver, never averaged in, and the
// exchange runs again to the same result; an island holding another secret is named and every
// island stops, its chunks never averaged in.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/mpi_communicator.h"
#include "optim/outer/island_exchange.h"
#include "tests/mpi_test_env.h"

namespace {

namespace outer = atl::optim::outer;
using atl::comm::MessageAuthenticator;

const std::string kSecret = "an island secret of 32 bytes....";

class ExchangeAuthentication : public ::testing::Test {
 protected:
  atl::comm::MpiCommunicator& world() { return *world_; }
  int rank() { return world_->rank(); }

  // This rank's pseudo-gradient: different on every island, not a multiple of the island count.
  at::Tensor values() {
    at::manual_seed(40 + rank());
    return at::randn({1001});
  }
  outer::ExchangeAuthentication with(const std::string& secret) {
    return {std::make_shared<MessageAuthenticator>(secret), "test session"};
  }
  uint64_t total(uint64_t mine) {
    MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_UINT64_T, MPI_SUM, world_->handle());
    return mine;
  }
  // Whether `t` is bitwise the same on every rank.
  bool same_everywhere(const at::Tensor& t) {
    at::Tensor first = t.clone();
    world_->broadcast(first, 0)->wait();
    int equal = first.equal(t) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &equal, 1, MPI_INT, MPI_MIN, world_->handle());
    return equal == 1;
  }

 private:
  std::shared_ptr<atl::comm::MpiCommunicator> world_ = atl::test::MpiTestEnv::runtime().world();
};

TEST_F(ExchangeAuthentication, TaggedMeansAreBitwiseTheUntaggedOnes) {
  for (outer::Codec codec : {outer::Codec::kNone, outer::Codec::kInt8}) {
    outer::IslandExchange plain(world(), codec, {}), tagged(world(), codec, {});
    tagged.authenticate(with(kSecret));
    const at::Tensor expected = plain.mean(values()), mean = tagged.mean(values());
    EXPECT_TRUE(mean.equal(expected)) << outer::codec_name(codec);
    EXPECT_TRUE(same_everywhere(mean));
    // Each message carries a 32-byte tag, and each of the two phases one agreement of k ints.
    EXPECT_GT(tagged.bytes_sent(), plain.bytes_sent());
    EXPECT_EQ(total(tagged.rejected_chunks()), 0u);
  }
}

TEST_F(ExchangeAuthentication, AChunkAlteredInFlightIsCaughtAndNeverAveragedIn) {
  outer::IslandExchange plain(world(), outer::Codec::kNone, {}), tagged(world(), outer::Codec::kNone, {});
  tagged.authenticate(with(kSecret));
  tagged.corrupt_in_flight({/*exchange=*/2, /*island=*/1});
  for (int exchange = 1; exchange <= 3; ++exchange) {
    const at::Tensor expected = plain.mean(values() * exchange), mean = tagged.mean(values() * exchange);
    EXPECT_TRUE(mean.equal(expected)) << "exchange " << exchange;
    // Island 1's first chunk of exchange 2 goes to island 0, which alone rejects it.
    EXPECT_EQ(total(tagged.rejected_chunks()), exchange < 2 ? 0u : 1u) << "exchange " << exchange;
  }
  // NoLoCo's group mean: island 0 alters the tensor it sends to every other member.
  tagged.corrupt_in_flight({/*exchange=*/4, /*island=*/0});
  std::vector<int> members{0, 1, 2};
  const std::vector<at::Tensor> expected = plain.group_mean({values(), values() * 2}, members);
  const std::vector<at::Tensor> means = tagged.group_mean({values(), values() * 2}, members);
  EXPECT_TRUE(means[0].equal(expected[0]) && means[1].equal(expected[1]));
  EXPECT_EQ(total(tagged.rejected_chunks()), 1u + 2u);
}

TEST_F(ExchangeAuthentication, AnIslandWithAnotherSecretIsNamedAndNeverAveragedIn) {
  const int impostor = world().size() - 1;
  outer::IslandExchange tagged(world(), outer::Codec::kNone, {});
  tagged.authenticate(with(rank() == impostor ? kSecret + " but not the job's" : kSecret));
  try {
    tagged.mean(values());
    ADD_FAILURE() << "a mean was taken with an impostor's chunks";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("chunks from island " + std::to_string(impostor) +
                                   " failed their HMAC check 3 times in a row and were never averaged in"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace
