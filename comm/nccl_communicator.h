// NCCL backend of the Communicator: CUDA tensors, one CUDA stream per communicator.
//
// Bootstrap as llm.c does: rank 0 of the group creates the ncclUniqueId and broadcasts it over the
// group's MPI communicator, then every rank calls ncclCommInitRank. Ordering with the compute
// stream follows ProcessGroupNCCL: an operation first makes the communicator's stream wait for the
// work already queued on ATen's current stream; Work::wait() makes the current stream wait for the
// operation (the host is not blocked), Work::synchronize() blocks the host, Work::test() polls its
// completion event. Tensors are recorded on the communicator's stream, so the caching allocator
// never hands their memory out while NCCL still uses it.
//
// Under the watchdog (DeviceBackend): every operation enters the flight recorder like MPI's, its
// record closed by poll() once its completion event has fired; poll() also reports
// ncclCommGetAsyncError, and abort() calls ncclCommAbort; after it every operation throws (one line).
#pragma once

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "comm/communicator.h"
#include "comm/device_backend.h"

namespace atl::comm {

class MpiCommunicator;

// The NCCL type of a tensor element type; throws std::invalid_argument for unsupported types.
ncclDataType_t nccl_datatype(at::ScalarType type);
ncclRedOp_t nccl_reduce_op(ReduceOp op);

class NcclCommunicator final : public Communicator, public DeviceBackend {
 public:
  // Collective over `bootstrap`. Throws std::runtime_error on every rank of the group when any
  // rank sees no CUDA device, naming the fix.
  NcclCommunicator(const MpiCommunicator& bootstrap, int device, std::string name);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override;
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override;
  WorkPtr broadcast(const at::Tensor& tensor, int root) override;
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  void barrier() override;
  void connect_peers(const std::vector<int>& peers) override;

  std::string poll() override;
  void abort() override;

 private:
  // An operation whose flight record closes when its completion event (shared with its Work) fires.
  struct Pending {
    std::shared_ptr<at::cuda::CUDAEvent> done;
    std::function<void()> close_record;
  };

  // Orders the communicator stream after the current stream, runs `enqueue` inside an NCCL group,
  // records completion (an event, and the flight record `record` closed when it fires).
  template <typename Enqueue>
  WorkPtr run(std::vector<at::Tensor> tensors, uint64_t record, Enqueue enqueue);

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  c10::cuda::CUDAStream stream_;
  std::mutex pending_mutex_;  // the watchdog polls from its thread
  std::mutex enqueue_mutex_;  // an enqueue and the watchdog's abort never overlap
  std::deque<Pending> pending_;
  std::atomic<bool> aborted_{false};
};

}  // namespace atl::comm
