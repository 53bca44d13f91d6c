#include "comm/nccl_communicator.h"

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
  NcclWork(cudaEvent_t done, std::vector<at::Tensor> tensors) : done_(done), tensors_(std::move(tensors)) {}
  ~NcclWork() override { cudaEventDestroy(done_); }
  void wait() override { CUDA_CHECK(cudaStreamWaitEvent(cudaStreamLegacy, done_, 0)); }
  bool test() override { return cudaEventQuery(done_) == cudaSuccess; }

 private:
  cudaEvent_t done_;
  std::vector<at::Tensor> tensors_;  // kept alive until the operation is done with them
};

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
    : name_(std::move(name)), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device) {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  int usable = (probe == cudaSuccess && device >= 0 && device < devices) ? 1 : 0;
  // Agree first, so a rank without a GPU cannot leave the others waiting for the unique id.
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, bootstrap.handle()));
  if (!usable)
    throw std::runtime_error("NCCL backend for group '" + name_ + "': CUDA device " + std::to_string(device) +
                             " is not usable on every rank (" +
                             (probe == cudaSuccess ? std::to_string(devices) + " devices here"
                                                   : std::string(cudaGetErrorString(probe))) +
                             "); run on a GPU machine or keep tensors on the CPU (MPI backend)");
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ncclUniqueId id;
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap.handle()));
  NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

template <typename Enqueue>
WorkPtr NcclCommunicator::run(std::vector<at::Tensor> tensors, Enqueue enqueue) {
  CUDA_CHECK(cudaSetDevice(device_));
  cudaEvent_t ready, done;
  CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(ready, cudaStreamLegacy));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
  CUDA_CHECK(cudaEventDestroy(ready));
  NCCL_CHECK(ncclGroupStart());
  enqueue();
  NCCL_CHECK(ncclGroupEnd());
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(done, stream_));
  return std::make_shared<NcclWork>(done, std::move(tensors));
}

WorkPtr NcclCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_cuda_tensor(tensor, "all_reduce");
  counters_.add(OpKind::kAllReduce, ring_wire_bytes(tensor.nbytes(), size_, 2));
  return run({tensor}, [&] {
    NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                             nccl_datatype(tensor.scalar_type()), nccl_reduce_op(op), comm_, stream_));
  });
}

WorkPtr NcclCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  check_cuda_tensor(input, "reduce_scatter");
  check_cuda_tensor(output, "reduce_scatter");
  check_shard("NCCL reduce_scatter", input, output, size_, rank_);
  counters_.add(OpKind::kReduceScatter, ring_wire_bytes(input.nbytes(), size_, 1));
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  const size_t element = input.element_size();
  return run({input, output}, [&] {
    if (input.numel() % size_ == 0) {
      NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), type,
                                   nccl_reduce_op(op), comm_, stream_));
      return;
    }
    // Uneven shards: one reduce per owner, fused into a single NCCL group.
    for (int r = 0; r < size_; ++r) {
      const ShardRange range = shard_range(input.numel(), size_, r);
      const char* send = static_cast<const char*>(input.data_ptr()) + range.offset * element;
      NCCL_CHECK(ncclReduce(send, r == rank_ ? output.data_ptr() : nullptr, range.numel, type,
                            nccl_reduce_op(op), r, comm_, stream_));
    }
  });
}

WorkPtr NcclCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  check_cuda_tensor(input, "all_gather");
  check_cuda_tensor(output, "all_gather");
  check_shard("NCCL all_gather", output, input, size_, rank_);
  counters_.add(OpKind::kAllGather, ring_wire_bytes(output.nbytes(), size_, 1));
  const ncclDataType_t type = nccl_datatype(output.scalar_type());
  const size_t element = output.element_size();
  return run({input, output}, [&] {
    if (output.numel() % size_ == 0) {
      NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, comm_, stream_));
      return;
    }
    for (int r = 0; r < size_; ++r) {  // uneven shards: one broadcast per owner
      const ShardRange range = shard_range(output.numel(), size_, r);
      char* recv = static_cast<char*>(output.data_ptr()) + range.offset * element;
      NCCL_CHECK(
          ncclBroadcast(r == rank_ ? input.data_ptr() : nullptr, recv, range.numel, type, r, comm_, stream_));
    }
  });
}

WorkPtr NcclCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_cuda_tensor(tensor, "broadcast");
  counters_.add(OpKind::kBroadcast, ring_wire_bytes(tensor.nbytes(), size_, 1));
  return run({tensor}, [&] {
    NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                             nccl_datatype(tensor.scalar_type()), root, comm_, stream_));
  });
}

WorkPtr NcclCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<at::Tensor> tensors;
  for (const P2POp& op : ops) {
    check_cuda_tensor(op.tensor, op.kind == P2POp::Kind::kSend ? "send" : "recv");
    tensors.push_back(op.tensor);
    counters_.add(op.kind == P2POp::Kind::kSend ? OpKind::kSend : OpKind::kRecv,
                  op.kind == P2POp::Kind::kSend ? op.tensor.nbytes() : 0);
  }
  // NCCL matches point-to-point operations by order within a peer pair, not by tag.
  return run(std::move(tensors), [&] {
    for (const P2POp& op : ops) {
      const ncclDataType_t type = nccl_datatype(op.tensor.scalar_type());
      if (op.kind == P2POp::Kind::kSend)
        NCCL_CHECK(ncclSend(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, stream_));
      else
        NCCL_CHECK(ncclRecv(op.tensor.data_ptr(), op.tensor.numel(), type, op.peer, comm_, stream_));
    }
  });
}

void NcclCommunicator::barrier() {
  counters_.add(OpKind::kBarrier, 0);
  CUDA_CHECK(cudaSetDevice(device_));
  void* flag = nullptr;
  CUDA_CHECK(cudaMalloc(&flag, sizeof(float)));
  NCCL_CHECK(ncclAllReduce(flag, flag, 1, ncclFloat32, ncclSum, comm_, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  CUDA_CHECK(cudaFree(flag));
}

}  // namespace atl::comm
