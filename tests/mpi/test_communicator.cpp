// Every Communicator operation on every supported dtype, on the world and on sub-groups, with
// sizes 0, 1, odd and not divisible by the group, plus two operations in flight at once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "atoll/build_config.h"
#include "comm/mpi_communicator.h"
#include "tests/mpi_test_env.h"

using atl::comm::MpiCommunicator;
using atl::comm::ReduceOp;

namespace {

const at::ScalarType kDtypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong};
const int64_t kSizes[] = {0, 1, 7, 1000, 4099};

std::unique_ptr<MpiCommunicator> world() {
  return atl::test::MpiTestEnv::runtime().world();
}

// A tensor whose values depend on (rank, index) and are exact in every dtype (small integers).
at::Tensor rank_tensor(int rank, int64_t numel, at::ScalarType dtype) {
  return (at::arange(numel, at::kLong).remainder(13) + rank).to(dtype);
}

at::Tensor expected_sum(int size, int64_t numel, at::ScalarType dtype) {
  at::Tensor sum = at::zeros({numel}, at::kLong);
  for (int r = 0; r < size; ++r) sum += at::arange(numel, at::kLong).remainder(13) + r;
  return sum.to(dtype);
}

}  // namespace

TEST(Communicator, AllReduceSumAvgMaxEveryDtypeAndSize) {
  auto comm = world();
  for (at::ScalarType dtype : kDtypes) {
    for (int64_t n : kSizes) {
      at::Tensor t = rank_tensor(comm->rank(), n, dtype);
      comm->all_reduce(t, ReduceOp::kSum)->wait();
      EXPECT_TRUE(t.equal(expected_sum(comm->size(), n, dtype))) << at::toString(dtype) << " n=" << n;

      t = rank_tensor(comm->rank(), n, dtype);
      comm->all_reduce(t, ReduceOp::kMax)->wait();
      EXPECT_TRUE(t.equal(rank_tensor(comm->size() - 1, n, dtype))) << at::toString(dtype) << " n=" << n;

      t = rank_tensor(comm->rank(), n, dtype).to(at::kDouble).mul(comm->size()).to(dtype);
      comm->all_reduce(t, ReduceOp::kAvg)->wait();
      EXPECT_TRUE(t.equal(expected_sum(comm->size(), n, dtype)))
          << "avg " << at::toString(dtype) << " n=" << n;
    }
  }
}

TEST(Communicator, ReduceScatterAndAllGatherUnevenShards) {
  auto comm = world();
  for (at::ScalarType dtype : kDtypes) {
    for (int64_t n : kSizes) {
      const auto mine = atl::comm::shard_range(n, comm->size(), comm->rank());
      at::Tensor input = rank_tensor(comm->rank(), n, dtype);
      at::Tensor output = at::empty({mine.numel}, dtype);
      comm->reduce_scatter(input, output, ReduceOp::kSum)->wait();
      EXPECT_TRUE(output.equal(expected_sum(comm->size(), n, dtype).narrow(0, mine.offset, mine.numel)))
          << at::toString(dtype) << " n=" << n;

      at::Tensor full = at::full({n}, -1, dtype);
      at::Tensor piece =
          at::arange(mine.offset, mine.offset + mine.numel, at::kLong).remainder(100).to(dtype);
      comm->all_gather(piece, full)->wait();
      EXPECT_TRUE(full.equal(at::arange(n, at::kLong).remainder(100).to(dtype)))
          << at::toString(dtype) << " n=" << n;
    }
  }
}

TEST(Communicator, ShapeMismatchIsAClearError) {
  auto comm = world();
  at::Tensor input = at::zeros({10});
  at::Tensor wrong = at::zeros({11});
  try {
    comm->reduce_scatter(input, wrong, ReduceOp::kSum);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "reduce_scatter: the shard must hold " +
                  std::to_string(atl::comm::shard_range(10, comm->size(), comm->rank()).numel) +
                  " elements of Float (this rank's share of 10), got 11"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm->all_reduce(at::zeros({4, 4}).t(), ReduceOp::kSum),
               std::invalid_argument);  // not contiguous
}

TEST(Communicator, BroadcastFromEveryRoot) {
  auto comm = world();
  for (at::ScalarType dtype : kDtypes) {
    for (int root = 0; root < comm->size(); ++root) {
      at::Tensor t = rank_tensor(comm->rank(), 1001, dtype);
      comm->broadcast(t, root)->wait();
      EXPECT_TRUE(t.equal(rank_tensor(root, 1001, dtype)));
    }
  }
}

TEST(Communicator, SendRecvRingAndBatchedExchange) {
  auto comm = world();
  const int next = (comm->rank() + 1) % comm->size(), prev = (comm->rank() + comm->size() - 1) % comm->size();
  for (at::ScalarType dtype : kDtypes) {
    // A ring with blocking-style ordering would deadlock; batched send/recv must not.
    at::Tensor out = rank_tensor(comm->rank(), 777, dtype), in = at::empty({777}, dtype);
    comm->batch_p2p(
            {{atl::comm::P2POp::Kind::kSend, out, next, 3}, {atl::comm::P2POp::Kind::kRecv, in, prev, 3}})
        ->wait();
    EXPECT_TRUE(in.equal(rank_tensor(prev, 777, dtype)));
  }
  // Plain send/recv between pairs (0<->1, 2<->3): lower rank sends first.
  const int peer = comm->rank() ^ 1;
  if (peer < comm->size()) {
    at::Tensor t = rank_tensor(comm->rank(), 5, at::kFloat), got = at::empty({5});
    if (comm->rank() < peer) {
      comm->send(t, peer, 9)->wait();
      comm->recv(got, peer, 9)->wait();
    } else {
      comm->recv(got, peer, 9)->wait();
      comm->send(t, peer, 9)->wait();
    }
    EXPECT_TRUE(got.equal(rank_tensor(peer, 5, at::kFloat)));
  }
}

TEST(Communicator, TwoOperationsInFlightCompleteAroundComputation) {
  auto comm = world();
  at::Tensor a = at::ones({1 << 20}), b = at::full({4099}, 2.0);
  auto wa = comm->all_reduce(a, ReduceOp::kSum);
  auto wb = comm->all_reduce(b, ReduceOp::kMax);
  // Computation between start and wait, as the data-parallel reducer does during backward.
  at::Tensor busy = at::mm(at::randn({128, 128}), at::randn({128, 128}));
  while (!wa->test() || !wb->test()) {
  }
  wa->wait();
  wb->wait();
  EXPECT_TRUE(a.equal(at::full({1 << 20}, static_cast<float>(comm->size()))));
  EXPECT_TRUE(b.equal(at::full({4099}, 2.0)));
  EXPECT_EQ(busy.sizes(), (at::IntArrayRef{128, 128}));
}

TEST(Communicator, SubGroupsAndDuplicatesAreIndependent) {
  auto comm = world();
  // Even and odd ranks form two groups; each sums its own ranks.
  auto half = comm->split(comm->rank() % 2, comm->rank(), "parity");
  at::Tensor t = at::full({3}, static_cast<double>(comm->rank()), at::kDouble);
  half->all_reduce(t, ReduceOp::kSum)->wait();
  double expected = 0;
  for (int r = comm->rank() % 2; r < comm->size(); r += 2) expected += r;
  EXPECT_TRUE(t.equal(at::full({3}, expected, at::kDouble)));
  EXPECT_EQ(half->size(), (comm->size() + 1 - comm->rank() % 2) / 2);

  auto dup = comm->duplicate("dup");
  at::Tensor x = at::ones({2}), y = at::ones({2});
  auto wx = dup->all_reduce(x, ReduceOp::kSum);
  auto wy = comm->all_reduce(y, ReduceOp::kSum);
  wy->wait();
  wx->wait();
  EXPECT_EQ(x.sum().item<float>(), 2.0f * comm->size());
  EXPECT_EQ(y.sum().item<float>(), 2.0f * comm->size());
}

TEST(Communicator, ByteCountersFollowRingCosts) {
  auto comm = world();
  at::Tensor t = at::zeros({1024});  // 4096 bytes
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  comm->all_reduce(t, ReduceOp::kSum)->wait();
  const uint64_t p = comm->size();
  EXPECT_EQ(comm->bytes().calls(atl::comm::OpKind::kAllReduce), 2u);
  EXPECT_EQ(comm->bytes().bytes(atl::comm::OpKind::kAllReduce), 2 * 2 * 4096 * (p - 1) / p);
  EXPECT_EQ(comm->bytes().total_bytes(), comm->bytes().bytes(atl::comm::OpKind::kAllReduce));
}

#if ATOLL_CUDA
// The NCCL backend builds here but can only run on a GPU machine; what can be checked without one
// is checked: type mapping, and that a GPU-less group fails on every rank with the fix named
// instead of hanging in the unique-id broadcast.
#include "comm/nccl_communicator.h"

TEST(NcclCommunicator, MapsEveryTensorTypeOrRefusesIt) {
  EXPECT_EQ(atl::comm::nccl_datatype(at::kFloat), ncclFloat32);
  EXPECT_EQ(atl::comm::nccl_datatype(at::kDouble), ncclFloat64);
  EXPECT_EQ(atl::comm::nccl_datatype(at::kBFloat16), ncclBfloat16);
  EXPECT_EQ(atl::comm::nccl_datatype(at::kHalf), ncclFloat16);
  EXPECT_EQ(atl::comm::nccl_datatype(at::kInt), ncclInt32);
  EXPECT_EQ(atl::comm::nccl_datatype(at::kLong), ncclInt64);
  EXPECT_THROW(atl::comm::nccl_datatype(at::kBool), std::invalid_argument);
  EXPECT_EQ(atl::comm::nccl_reduce_op(ReduceOp::kAvg), ncclAvg);
  EXPECT_EQ(atl::comm::nccl_reduce_op(ReduceOp::kMax), ncclMax);
}

TEST(NcclCommunicator, WithoutAGpuEveryRankGetsAClearError) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;  // no driver: no GPU either
  ASSERT_EQ(devices, 0) << "tests/mpi/tests.cmake hides the GPUs from this binary (CUDA_VISIBLE_DEVICES=)";
  auto comm = world();
  try {
    atl::comm::NcclCommunicator nccl(*comm, 0, "world");
    FAIL() << "expected an error without a GPU";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("run on a GPU machine"), std::string::npos) << e.what();
  }
}
#endif
