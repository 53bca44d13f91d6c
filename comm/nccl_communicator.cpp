#include "comm/nccl_communicator.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"

namespace atl::comm {
namespace {

void nccl_check(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw std::runtime_error(std::string("NCCL error in ") + call + ": " + ncclGetErrorString(result));
}
void cuda_check(cudaError_t result, const char* call) {
  if (result != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + call + ": " + cudaGetErrorString(result));
}
#define NCCL_CHECK(call) nccl_check((call), #call)
#define CUDA_CHECK(call) cuda_check((call), #call)

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<at::cuda::CUDAEvent> done, int device) : done_(std::move(done)), device_(device) {}
  // The current stream waits for the operation; the host goes on.
  void wait() override { done_->block(c10::cuda::getCurrentCUDAStream(device_)); }
  void synchronize() override { done_->synchronize(); }
  bool test() override { return done_->query(); }

 private:
  std::shared_ptr<at::cuda::CUDAEvent> done_;
  int device_;
};

// A stream of the device for this group's operations, after every rank of the group has agreed that
// its device is usable (so no rank waits for a unique id that a rank without a GPU never sends).
c10::cuda::CUDAStream agreed_device_stream(const MpiCommunicator& bootstrap, int device,
                                           const std::string& name) {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  int usable = (probe == cudaSuccess && device >= 0 && device < devices) ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, bootstrap.handle()));
  if (!usable)
    throw std::runtime_error("NCCL backend for group '" + name + "': CUDA device " + std::to_string(device) +
                             " is not usable on every rank (" +
                             (probe == cudaSuccess ? std::to_string(devices) + " devices here"
                                                   : std::string(cudaGetErrorString(probe))) +
                             "); run on a GPU machine or keep tensors on the CPU (MPI backend)");
  CUDA_CHECK(cudaSetDevice(device));
  return c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device));
}

void check_cuda_tensor(const at::Tensor& t, const char* op) {
  check_contiguous(t, op);
  if (!t.is_cuda())
    throw std::invalid_argument(std::string("NCCL ") + op + ": tensor is on " + t.device().str() +
                                ", NCCL needs CUDA tensors (CPU tensors go through the MPI backend)");
}

}  // namespace

ncclDataType_t nccl_datatype(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    case at::kByte:
      return ncclUint8;
    case at::kChar:
      return ncclInt8;
    default:
      throw std::invalid_argument(std::string("NCCL backend: unsupported dtype ") + at::toString(type));
  }
}

ncclRedOp_t nccl_reduce_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  throw std::invalid_argument("NCCL backend: unknown reduce op");
}

NcclCommunicator::NcclCommunicator(const MpiCommunicator& bootstrap, int device, std::string name)
    : name_(std::move(name)),
      rank_(bootstrap.rank()),
      size_(bootstrap.size()),
      device_(device),
      stream_(agreed_device_stream(bootstrap, device, name_)) {
  label_ = bootstrap.label();  // flight records name the group as its MPI plane does
  ncclUniqueId id;
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap.handle()));
  NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_ || aborted_) return;
  // Unwinding from an error: recent NCCL's destroy talks to the peers, which may never answer (they
  // wait in a collective this rank will not join), and this rank would block instead of exiting.
  // Abort is local.
  if (std::uncaught_exceptions() > 0)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);
}

template <typename Enqueue>
WorkPtr NcclCommunicator::run(std::vector<at::Tensor> tensors, uint64_t record, Enqueue enqueue) {
  // After the watchdog's abort the communicator is freed: nothing may be enqueued on it again (the
  // lock keeps an abort from freeing it halfway through an enqueue).
  const std::lock_guard<std::mutex> enqueue_lock(enqueue_mutex_);
  if (aborted_)
    throw std::runtime_error("NCCL communicator of group '" + name_ +
                             "' was aborted (by the watchdog, after a hang or an NCCL error); no further "
                             "operation can run on it");
  CUDA_CHECK(cudaSetDevice(device_));
  at::cuda::CUDAEvent ready;  // what the current stream has queued so far: the tensors' producers
  ready.record(c10::cuda::getCurrentCUDAStream(device_));
  ready.block(stream_);
  // The allocator may reuse these tensors' memory only after this stream's work on them is done.
  for (const at::Tensor& t : tensors)
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream_);
  NCCL_CHECK(ncclGroupStart());
  enqueue();
  NCCL_CHECK(ncclGroupEnd());
  auto done = std::make_shared<at::cuda::CUDAEvent>();
  done->record(stream_);
  if (std::function<void()> close = record_closer(record)) {
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back({done, std::move(close)});
  }
  return std::make_shared<NcclWork>(std::move(done), device_);
}

std::string NcclCommunicator::poll() {
  // The watchdog's thread: without this, querying an event would make the thread's current device
  // (GPU 0) hold a context of this process, ~0.5 GiB on GPU 0 for every rank of the node.
  cudaSetDevice(device_);
  {
    const std::lock_guard<std::mutex> lock(pending_mutex_);
    // One stream: operations complete in the order they were enqueued.
    while (!pending_.empty() && pending_.front().done->query()) {
      pending_.front().close_record();
      pending_.pop_front();
    }
  }
  ncclResult_t async_error = ncclSuccess;
  if (aborted_ || ncclCommGetAsyncError(comm_, &async_error) != ncclSuccess || async_error == ncclSuccess ||
      async_error == ncclInProgress)
    return "";
  return "NCCL error on " + label() + ": " + ncclGetErrorString(async_error);
}

void NcclCommunicator::abort() {
  const std::lock_guard<std::mutex> enqueue_lock(enqueue_mutex_);
  if (!aborted_.exchange(true)) ncclCommAbort(comm_);
}

WorkPtr NcclCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_cuda_tensor(tensor, "all_reduce");
  counters().add(OpKind::kAllReduce, ring_wire_bytes(tensor.nbytes(), size_, 2));
  return run({tensor}, record_start(OpKind::kAllReduce, tensor.nbytes()), [&] {
    NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                             nccl_datatype(tensor.scalar_type()), nccl_reduce_op(op), comm_,
                             stream_.stream()));
  });
}

WorkPtr NcclCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  check_cuda_tensor(input, "reduce_scatter");
  check_cuda_tensor(output, "reduce_scatter");
  check_shard("NCCL reduce_scatter", input, output, size_, rank_);
  counters().add(OpKind::kReduceScatter, ring_wire_bytes(input.nbytes(), size_, 1));
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const size_t element = input.element_size();
  return run({input, output}, record_start(OpKind::kReduceScatter, input.nbytes()), [&] {
    if (input.numel() % size_ == 0) {
      NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), type,
                                   nccl_reduce_op(op), comm_, stream_.stream()));
      return;
    }
    // Uneven shards: one reduce per owner, fused into a single NCCL group.
    for (int r = 0; r < size_; ++r) {
      const ShardRange range = shard_range(input.numel(), size_, r);
      const char* send = static_cast<const char*>(input.data_ptr()) + range.offset * element;
      NCCL_CHECK(ncclReduce(send, r == rank_ ? output.data_ptr() : nullptr, range.numel, type,
                            nccl_reduce_op(op), r, comm_, stream_.stream()));
    }
  });
}

WorkPtr NcclCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  check_cuda_tensor(input, "all_gather");
  check_cuda_tensor(output, "all_gather");
  check_shard("NCCL all_gather", output, input, size_, rank_);
  counters().add(OpKind::kAllGather, ring_wire_bytes(output.nbytes(), size_, 1));
  const ncclDataType_t type = nccl_datatype(output.scalar_type());
  const size_t element = output.element_size();
  return run({input, output}, record_start(OpKind::kAllGather, output.nbytes()), [&] {
    if (output.numel() % size_ == 0) {
      NCCL_CHECK(
          ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, comm_, stream_.stream()));
      return;
    }
    for (int r = 0; r < size_; ++r) {  // uneven shards: one broadcast per owner
      const ShardRange range = shard_range(output.numel(), size_, r);
      char* recv = static_cast<char*>(output.data_ptr()) + range.offset * element;
      NCCL_CHECK(ncclBroadcast(r == rank_ ? input.data_ptr() : nullptr, recv, range.numel, type, r, comm_,
                               stream_.stream()));
    }
  });
}

WorkPtr NcclCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_cuda_tensor(tensor, "broadcast");
  counters().add(OpKind::kBroadcast, ring_wire_bytes(tensor.nbytes(), size_, 1));
  return run({tensor}, record_start(OpKind::kBroadcast, tensor.nbytes()), [&] {
    NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                             nccl_datatype(tensor.scalar_type()), root, comm_, stream_.stream()));
  });
}

WorkPtr NcclCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<at::Tensor> tensors;
  uint64_t sent = 0;
  for (const P2POp& op : ops) {
    const bool is_send = op.kind == P2POp::Kind::kSend;
    check_cuda_tensor(op.tensor, is_send ? "send" : "recv");
    if (op.peer < 0 || op.peer >= size_)
      throw std::invalid_argument("NCCL p2p: peer " + std::to_string(op.peer) + " outside group of " +
                                  std::to_string(size_));
    tensors.push_back(op.tensor);
    counters().add(is_send ? OpKind::kSend : OpKind::kRecv, is_send ? op.tensor.nbytes() : 0);
    if (is_send) sent += op.tensor.nbytes();
  }
  // One flight record for the batch, as on MPI. NCCL matches point-to-point operations by order
  // within a peer pair, not by tag: the executor posts each compute step's legs as one batch.
  const uint64_t record =
      record_start(sent > 0 ? OpKind::kSend : OpKind::kRecv, sent, /*point_to_point=*/true);
  return run(std::move(tensors), record, [&] {
    for (const P2POp& op : ops) {
      const ncclDataType_t type = nccl_datatype(op.tensor.scalar_type());
      if (op.kind == P2POp::Kind::kSend)
        NCCL_CHECK(ncclSend(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, stream_.stream()));
      else
        NCCL_CHECK(ncclRecv(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, stream_.stream()));
    }
  });
}

void NcclCommunicator::connect_peers(const std::vector<int>& peers) {
  for (int peer : peers)
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw std::invalid_argument("NCCL connect: peer " + std::to_string(peer) + " of rank " +
                                  std::to_string(rank_) + " in a group of " + std::to_string(size_));
  if (peers.empty()) return;
  // A float each way with every peer, in one group on every rank: both directions of each pair
  // connect together. Not counted as traffic (it carries nothing); flight-recorded like any batch.
  const auto options = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_);
  const at::Tensor sent = at::zeros({static_cast<int64_t>(peers.size())}, options);
  const at::Tensor received = at::empty_like(sent);
  run({sent, received}, record_start(OpKind::kSend, sent.nbytes(), /*point_to_point=*/true), [&] {
    for (size_t i = 0; i < peers.size(); ++i) {
      const auto slot = static_cast<int64_t>(i);
      NCCL_CHECK(ncclSend(sent[slot].data_ptr(), 1, ncclFloat32, peers[i], comm_, stream_.stream()));
      NCCL_CHECK(ncclRecv(received[slot].data_ptr(), 1, ncclFloat32, peers[i], comm_, stream_.stream()));
    }
  })->synchronize();
}

void NcclCommunicator::barrier() {
  counters().add(OpKind::kBarrier, 0);
  const at::Tensor flag = at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_));
  run({flag}, record_start(OpKind::kBarrier, 0), [&] {
    NCCL_CHECK(
        ncclAllReduce(flag.data_ptr(), flag.data_ptr(), 1, ncclFloat32, ncclSum, comm_, stream_.stream()));
  })->synchronize();
}

}  // namespace atl::comm
