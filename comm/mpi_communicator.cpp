#include "comm/mpi_communicator.h"

#include "comm/background_progress.h"

#include <chrono>
#include <climits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"
#include "text/joined.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

namespace atl::comm {
namespace {

uint64_t elapsed_ns(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace

// A set of MPI requests plus what must outlive them: the tensors (so buffers stay alive),
// count/displacement arrays of the v-collectives, a finisher run once on completion (the division
// of an average) and `on_done`, run once when the operation completes or the Work is dropped (it
// closes the flight record).
class MpiWork final : public Work {
 public:
  // `counters` (the issuing communicator's) receive the time wait() blocks.
  MpiWork(ByteCounters& counters, std::vector<at::Tensor> keep_alive, std::function<void()> finish,
          std::function<void()> on_done)
      : counters_(counters),
        keep_alive_(std::move(keep_alive)),
        finish_(std::move(finish)),
        on_done_(std::move(on_done)) {}
  ~MpiWork() override {
    if (on_done_) on_done_();
  }

  std::vector<MPI_Request> requests;
  std::vector<int> counts, displacements;

  void wait() override {
    if (done_) return;
    const auto start = std::chrono::steady_clock::now();
    MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    counters_.add_wait(elapsed_ns(start));
    complete();
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE));
    if (flag) complete();
    return done_;
  }

 private:
  void complete() {
    done_ = true;
    if (finish_) finish_();
    keep_alive_.clear();
    if (on_done_) std::exchange(on_done_, {})();
  }

  ByteCounters& counters_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finish_;
  std::function<void()> on_done_;
  bool done_ = false;
};

namespace {

constexpr size_t kBlockingAllReduceBytes = 64 * 1024;

// Whether this MPI library reads and writes device memory itself: Open MPI says so when built with
// CUDA; any other MPI is taken not to.
bool mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

// A tensor MPI can be handed: contiguous, and in host memory unless MPI is CUDA-aware (a device
// pointer would otherwise crash inside MPI or silently send garbage).
void check_mpi_tensor(const at::Tensor& tensor, const char* op) {
  check_contiguous(tensor, op);
  if (tensor.is_cuda() && !mpi_is_cuda_aware())
    throw std::invalid_argument(std::string("MPI ") + op + ": tensor is on " + tensor.device().str() +
                                " and this MPI is not CUDA-aware; CUDA tensors go through the group's NCCL "
                                "plane (run.device: cuda) or must be copied to the CPU first");
}

int checked_count(int64_t numel, const char* op) {
  if (numel > INT_MAX)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(numel) +
                                " elements exceed one MPI call's limit of 2^31-1; split the tensor");
  return static_cast<int>(numel);
}

// "0,2,4": the world ranks of the members of `comm`, in group order.
std::string world_ranks_of(MPI_Comm comm, int size) {
  MPI_Group group, world;
  MPI_CHECK(MPI_Comm_group(comm, &group));
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  std::vector<int> ranks(static_cast<size_t>(size)), world_ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  MPI_CHECK(MPI_Group_translate_ranks(group, size, ranks.data(), world, world_ranks.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return text::joined(world_ranks, ",", [](int r) { return std::to_string(r); });
}

uint64_t ring_bytes(const at::Tensor& t, int size, int passes) {
  return ring_wire_bytes(t.nbytes(), size, passes);
}

}  // namespace

MpiCommunicator::MpiCommunicator(const MpiRuntime& runtime, MPI_Comm comm, std::string name)
    : runtime_(runtime), comm_(comm), name_(std::move(name)) {
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  label_ = name_ + "[" + world_ranks_of(comm_, size_) + "]";
}

std::shared_ptr<MpiWork> MpiCommunicator::make_work(OpKind op, uint64_t wire_bytes, uint64_t tensor_bytes,
                                                    std::vector<at::Tensor> keep_alive,
                                                    std::function<void()> finish) {
  counters().add(op, wire_bytes);
  return std::make_shared<MpiWork>(counters(), std::move(keep_alive), std::move(finish),
                                   record_closer(record_start(op, tensor_bytes)));
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

WorkPtr MpiCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_mpi_tensor(tensor, "all_reduce");
  auto work = make_work(OpKind::kAllReduce, ring_bytes(tensor, size_, 2), tensor.nbytes(), {tensor},
                        average_finisher(tensor, op, size_));
  if (size_ == 1 || tensor.numel() == 0) return work;
  if (tensor.nbytes() <= kBlockingAllReduceBytes) {
    // Latency-bound sizes: the blocking collective is faster and there is little to overlap. Every
    // rank makes the same choice for the same size, so blocking and non-blocking calls still match.
    const auto start = std::chrono::steady_clock::now();
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()),
                            runtime_.datatype(tensor.scalar_type()),
                            runtime_.reduce_op(tensor.scalar_type(), op), comm_));
    counters().add_wait(elapsed_ns(start));
    work->wait();
    return work;
  }
  work->requests.resize(1);
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), checked_count(tensor.numel(), "all_reduce"),
                           runtime_.datatype(tensor.scalar_type()),
                           runtime_.reduce_op(tensor.scalar_type(), op), comm_, work->requests.data()));
  return work;
}

WorkPtr MpiCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  check_mpi_tensor(input, "reduce_scatter");
  check_mpi_tensor(output, "reduce_scatter");
  check_shard("reduce_scatter", input, output, size_, rank_);
  auto work = make_work(OpKind::kReduceScatter, ring_bytes(input, size_, 1), input.nbytes(), {input, output},
                        average_finisher(output, op, size_));
  if (size_ == 1) {
    output.copy_(input);
    return work;
  }
  if (input.numel() == 0) return work;
  checked_count(input.numel(), "reduce_scatter");
  for (int r = 0; r < size_; ++r)
    work->counts.push_back(static_cast<int>(shard_range(input.numel(), size_, r).numel));
  work->requests.resize(1);
  MPI_CHECK(MPI_Ireduce_scatter(input.data_ptr(), output.data_ptr(), work->counts.data(),
                                runtime_.datatype(input.scalar_type()),
                                runtime_.reduce_op(input.scalar_type(), op), comm_, work->requests.data()));
  return work;
}

WorkPtr MpiCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  check_mpi_tensor(input, "all_gather");
  check_mpi_tensor(output, "all_gather");
  check_shard("all_gather", output, input, size_, rank_);
  const ShardRange mine = shard_range(output.numel(), size_, rank_);
  auto work = make_work(OpKind::kAllGather, ring_bytes(output, size_, 1), output.nbytes(), {input, output});
  // In place when `input` is this rank's slice of `output` (MPI forbids aliased buffers otherwise).
  const bool in_place =
      input.data_ptr() == static_cast<char*>(output.data_ptr()) + mine.offset * output.element_size();
  if (size_ == 1) {
    if (!in_place) output.copy_(input);
    return work;
  }
  if (output.numel() == 0) return work;
  checked_count(output.numel(), "all_gather");
  for (int r = 0; r < size_; ++r) {
    const ShardRange range = shard_range(output.numel(), size_, r);
    work->counts.push_back(static_cast<int>(range.numel));
    work->displacements.push_back(static_cast<int>(range.offset));
  }
  const MPI_Datatype type = runtime_.datatype(output.scalar_type());
  work->requests.resize(1);
  MPI_CHECK(MPI_Iallgatherv(in_place ? MPI_IN_PLACE : input.data_ptr(), mine.numel, type, output.data_ptr(),
                            work->counts.data(), work->displacements.data(), type, comm_,
                            work->requests.data()));
  return work;
}

WorkPtr MpiCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_mpi_tensor(tensor, "broadcast");
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside group of " +
                                std::to_string(size_));
  auto work = make_work(OpKind::kBroadcast, ring_bytes(tensor, size_, 1), tensor.nbytes(), {tensor});
  if (size_ == 1 || tensor.numel() == 0) return work;
  work->requests.resize(1);
  MPI_CHECK(MPI_Ibcast(tensor.data_ptr(), checked_count(tensor.numel(), "broadcast"),
                       runtime_.datatype(tensor.scalar_type()), root, comm_, work->requests.data()));
  return work;
}

WorkPtr MpiCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<at::Tensor> tensors;
  uint64_t sent = 0;
  for (const P2POp& op : ops) {
    tensors.push_back(op.tensor);
    if (op.kind == P2POp::Kind::kSend) sent += op.tensor.nbytes();
  }
  // One flight record for the batch; byte counters per leg below.
  const uint64_t record =
      record_start(sent > 0 ? OpKind::kSend : OpKind::kRecv, sent, /*point_to_point=*/true);
  auto work = std::make_shared<MpiWork>(counters(), std::move(tensors), std::function<void()>{},
                                        record_closer(record));
  work->requests.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& op = ops[i];
    const bool is_send = op.kind == P2POp::Kind::kSend;
    check_mpi_tensor(op.tensor, is_send ? "send" : "recv");
    if (op.peer < 0 || op.peer >= size_)
      throw std::invalid_argument("p2p: peer " + std::to_string(op.peer) + " outside group of " +
                                  std::to_string(size_));
    const int count = checked_count(op.tensor.numel(), "p2p");
    const MPI_Datatype type = runtime_.datatype(op.tensor.scalar_type());
    if (is_send) {
      counters().add(OpKind::kSend, op.tensor.nbytes());
      MPI_CHECK(MPI_Isend(op.tensor.data_ptr(), count, type, op.peer, op.tag, comm_, &work->requests[i]));
    } else {
      counters().add(OpKind::kRecv, 0);
      MPI_CHECK(MPI_Irecv(op.tensor.data_ptr(), count, type, op.peer, op.tag, comm_, &work->requests[i]));
    }
  }
  return work;
}

void MpiCommunicator::barrier() {
  counters().add(OpKind::kBarrier, 0);
  const std::function<void()> close_record = record_closer(record_start(OpKind::kBarrier, 0));
  const auto start = std::chrono::steady_clock::now();
  MPI_CHECK(MPI_Barrier(comm_));
  counters().add_wait(elapsed_ns(start));
  if (close_record) close_record();
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key, std::string name) const {
  MPI_Comm sub;
  MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
  return std::make_unique<MpiCommunicator>(runtime_, sub, std::move(name));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::duplicate(std::string name) const {
  MPI_Comm dup;
  MPI_CHECK(MPI_Comm_dup(comm_, &dup));
  return std::make_unique<MpiCommunicator>(runtime_, dup, std::move(name));
}

std::shared_ptr<void> MpiCommunicator::progress_in_background() {
  return std::make_shared<BackgroundProgress>();
}

}  // namespace atl::comm
