// The NCCL plane on real GPUs (one per rank): every operation on every dtype NCCL carries, with
// sizes 0, 1, odd and not divisible by the group; Work::wait ordering the current stream; flight
// records closed by the watchdog's poll; a first exchange between connected peers that would
// deadlock unconnected; a mesh group routing CPU tensors to MPI and CUDA tensors to
// NCCL into one set of byte counters; and MPI refusing a CUDA tensor with one line.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "comm/device_mesh.h"
#include "comm/flight_recorder.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "tests/mpi_test_env.h"
#include "tests/world_sizes.h"

using atl::comm::ReduceOp;

namespace {

const at::ScalarType kDtypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                  at::kInt,   at::kLong,   at::kByte,     at::kChar};
const int64_t kSizes[] = {0, 1, 7, 1000, 4099};

std::unique_ptr<atl::comm::MpiCommunicator> world() {
  return atl::test::MpiTestEnv::runtime().world();
}

int my_device(int rank) {
  return rank % static_cast<int>(torch::cuda::device_count());
}

// Values exact in every dtype (small integers) that depend on (rank, index), on this rank's GPU.
at::Tensor rank_tensor(int rank, int64_t numel, at::ScalarType dtype) {
  return (at::arange(numel, at::kLong).remainder(13) + rank)
      .to(at::Device(at::kCUDA, my_device(rank)), dtype);
}

at::Tensor expected_sum(int size, int64_t numel, at::ScalarType dtype) {
  at::Tensor sum = at::zeros({numel}, at::kLong);
  for (int r = 0; r < size; ++r) sum += at::arange(numel, at::kLong).remainder(13) + r;
  return sum.to(dtype);
}

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    nccl_ = std::make_unique<atl::comm::NcclCommunicator>(*world_, my_device(world_->rank()), "world");
  }
  std::unique_ptr<atl::comm::MpiCommunicator> world_ = world();
  std::unique_ptr<atl::comm::NcclCommunicator> nccl_;
};

TEST_F(Nccl, AllReduceSumMaxEveryDtypeAndSizeAvgOnFloats) {
  const int p = nccl_->size();
  for (at::ScalarType dtype : kDtypes)
    for (int64_t n : kSizes) {
      at::Tensor t = rank_tensor(nccl_->rank(), n, dtype);
      nccl_->all_reduce(t, ReduceOp::kSum)->wait();
      EXPECT_TRUE(t.cpu().equal(expected_sum(p, n, dtype))) << at::toString(dtype) << " n=" << n;
      at::Tensor m = rank_tensor(nccl_->rank(), n, dtype);
      nccl_->all_reduce(m, ReduceOp::kMax)->wait();
      EXPECT_TRUE(m.cpu().equal(rank_tensor(p - 1, n, dtype).cpu())) << at::toString(dtype) << " n=" << n;
      if (!at::isFloatingType(dtype)) continue;
      at::Tensor a = rank_tensor(nccl_->rank(), n, dtype);
      nccl_->all_reduce(a, ReduceOp::kAvg)->wait();
      EXPECT_TRUE(at::allclose(a.cpu().to(at::kDouble), expected_sum(p, n, at::kDouble) / p, 1e-2))
          << at::toString(dtype) << " n=" << n;
    }
}

TEST_F(Nccl, ReduceScatterAndAllGatherEvenAndUnevenShards) {
  const int p = nccl_->size(), me = nccl_->rank();
  for (at::ScalarType dtype : kDtypes)
    for (int64_t n : kSizes) {
      const atl::comm::ShardRange mine = atl::comm::shard_range(n, p, me);
      const at::Tensor input = rank_tensor(me, n, dtype);
      at::Tensor shard = at::empty({mine.numel}, input.options());
      nccl_->reduce_scatter(input, shard, ReduceOp::kSum)->wait();
      EXPECT_TRUE(shard.cpu().equal(expected_sum(p, n, dtype).narrow(0, mine.offset, mine.numel)))
          << at::toString(dtype) << " n=" << n;
      at::Tensor full = at::zeros({n}, input.options());
      const at::Tensor own = rank_tensor(0, n, dtype).narrow(0, mine.offset, mine.numel).contiguous();
      nccl_->all_gather(own, full)->wait();
      EXPECT_TRUE(full.cpu().equal(rank_tensor(0, n, dtype).cpu())) << at::toString(dtype) << " n=" << n;
    }
}

TEST_F(Nccl, BroadcastFromTheLastRank) {
  const int p = nccl_->size();
  for (at::ScalarType dtype : kDtypes) {
    at::Tensor t = rank_tensor(nccl_->rank(), 1000, dtype);
    nccl_->broadcast(t, p - 1)->wait();
    EXPECT_TRUE(t.cpu().equal(rank_tensor(p - 1, 1000, dtype).cpu())) << at::toString(dtype);
  }
}

ATOLL_RUNS_AT(Nccl, BatchedSendsAndReceivesAroundTheRing, 2, 8);
TEST_F(Nccl, BatchedSendsAndReceivesAroundTheRing) {
  const int p = nccl_->size(), me = nccl_->rank();
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    const at::Tensor mine = rank_tensor(me, 4099, dtype);
    at::Tensor from_prev = at::empty_like(mine), from_next = at::empty_like(mine);
    const int next = (me + 1) % p, prev = (me + p - 1) % p;
    // Both directions in one batch: posted in opposite orders on neighbours, which a batch allows.
    nccl_
        ->batch_p2p({{atl::comm::P2POp::Kind::kSend, mine, next},
                     {atl::comm::P2POp::Kind::kRecv, from_prev, prev},
                     {atl::comm::P2POp::Kind::kRecv, from_next, next},
                     {atl::comm::P2POp::Kind::kSend, mine, prev}})
        ->synchronize();
    EXPECT_TRUE(from_prev.cpu().equal(rank_tensor(prev, 4099, dtype).cpu())) << at::toString(dtype);
    EXPECT_TRUE(from_next.cpu().equal(rank_tensor(next, 4099, dtype).cpu())) << at::toString(dtype);
  }
  nccl_->barrier();
}

// Ends the process with a line if the scope is not left within `limit`: a hang becomes a failure.
class Deadline {
 public:
  Deadline(std::chrono::seconds limit, std::string what)
      : thread_([this, limit, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (done_signal_.wait_for(lock, limit, [this] { return done_; })) return;
          std::cerr << "deadline: " << what << " did not finish in " << limit.count() << " s" << std::endl;
          std::_Exit(3);
        }) {}
  ~Deadline() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_signal_.notify_one();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_signal_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members it reads exist
};

// A pipeline's first exchange (GPipe's last forward): rank 0 posts its send with its first
// receive from rank 1, while rank 1 reads that send's data on the host (a synchronising read)
// before it posts the send rank 0 receives. NCCL connects a pair inside the first batch that uses
// it and holds the host there until the peer's first batch on the pair: without connect_peers
// first, rank 0 would never send: the pipeline would hang.
ATOLL_RUNS_AT(Nccl, ConnectedPeersNeedNoMatchingFirstBatch, 2);
TEST_F(Nccl, ConnectedPeersNeedNoMatchingFirstBatch) {
  const int me = nccl_->rank(), other = 1 - me;
  const Deadline deadline(std::chrono::seconds(60), "the first exchange between connected peers");
  nccl_->connect_peers({other});
  const at::Tensor mine = rank_tensor(me, 4099, at::kFloat);
  at::Tensor theirs = at::empty_like(mine);
  if (me == 0) {
    nccl_
        ->batch_p2p(
            {{atl::comm::P2POp::Kind::kSend, mine, other}, {atl::comm::P2POp::Kind::kRecv, theirs, other}})
        ->synchronize();
  } else {
    nccl_->batch_p2p({{atl::comm::P2POp::Kind::kRecv, theirs, other}})->wait();
    const at::Tensor arrived = theirs.cpu();  // the host waits for rank 0's send here
    nccl_->batch_p2p({{atl::comm::P2POp::Kind::kSend, mine, other}})->synchronize();
    EXPECT_TRUE(arrived.equal(rank_tensor(other, 4099, at::kFloat).cpu()));
  }
  EXPECT_TRUE(theirs.cpu().equal(rank_tensor(other, 4099, at::kFloat).cpu()));
  nccl_->barrier();
}

TEST_F(Nccl, WaitOrdersTheCurrentStreamAndPollClosesTheFlightRecord) {
  atl::comm::FlightRecorder recorder(16);
  nccl_->record_in(&recorder);
  at::Tensor t = rank_tensor(nccl_->rank(), 1 << 20, at::kFloat);
  // Kernels queued after wait() on the current stream see the reduced values without a host sync.
  nccl_->all_reduce(t, ReduceOp::kSum)->wait();
  const at::Tensor doubled = t * 2;
  EXPECT_TRUE(doubled.cpu().equal(expected_sum(nccl_->size(), 1 << 20, at::kFloat) * 2));
  if (nccl_->size() > 1) {
    EXPECT_EQ(recorder.progress().at(nccl_->label()).issued, 1u);
    for (int i = 0; i < 100 && recorder.oldest_in_flight(); ++i) EXPECT_EQ(nccl_->poll(), "");
    EXPECT_FALSE(recorder.oldest_in_flight().has_value()) << "poll() left the record open";
    EXPECT_EQ(recorder.progress().at(nccl_->label()).completed, 1u);
  }
  nccl_->record_in(nullptr);
}

TEST(TwoPlanes, CpuTensorsGoToMpiCudaTensorsToNcclBothCountedInTheGroup) {
  auto comm = world();
  const int p = comm->size();
  atl::comm::DeviceMesh mesh(*comm, atl::comm::MeshShape{1, 1, p, 1}, my_device(comm->rank()));
  // An NCCL plane only in a group that spans ranks (here dp); tp, pp, model and embedding are
  // groups of one, and the islands exchange over MPI.
  EXPECT_EQ(mesh.device_backends().size(), p > 1 ? 1u : 0u);
  at::Tensor on_cpu = at::full({1024}, 1.0f),
             on_gpu = at::full({1024}, 1.0f, at::Device(at::kCUDA, my_device(comm->rank())));
  mesh.dp().all_reduce(on_cpu, ReduceOp::kSum)->wait();
  mesh.dp().all_reduce(on_gpu, ReduceOp::kSum)->wait();
  EXPECT_TRUE(on_cpu.equal(at::full({1024}, static_cast<float>(p))));
  EXPECT_TRUE(on_gpu.cpu().equal(at::full({1024}, static_cast<float>(p))));
  EXPECT_EQ(mesh.dp().bytes().calls(atl::comm::OpKind::kAllReduce), 2u);
}

TEST(MpiPlane, RefusesACudaTensorInOneLine) {
  auto comm = world();
  at::Tensor on_gpu = at::ones({4}, at::Device(at::kCUDA, my_device(comm->rank())));
  try {
    comm->all_reduce(on_gpu, ReduceOp::kSum)->wait();
    // A CUDA-aware MPI takes the device tensor: then it must reduce it right.
    EXPECT_TRUE(on_gpu.cpu().equal(at::full({4}, static_cast<float>(comm->size()))));
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("this MPI is not CUDA-aware"), std::string::npos) << e.what();
  }
}

}  // namespace
