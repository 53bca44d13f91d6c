// NCCL backend of the Communicator: CUDA tensors, one CUDA stream per communicator.
//
// Bootstrap as llm.c does: rank 0 of the group creates the ncclUniqueId and broadcasts it over the
// group's MPI communicator, then every rank calls ncclCommInitRank. Ordering with the compute
// stream follows ProcessGroupNCCL: an operation first makes the communicator's stream wait for the
// work already queued on the default stream; Work::wait() makes the default stream wait for the
// operation (the host is not blocked), Work::test() polls its completion event.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "comm/communicator.h"

namespace atl::comm {

class MpiCommunicator;

// The NCCL type of a tensor element type; throws std::invalid_argument for unsupported types.
ncclDataType_t nccl_datatype(at::ScalarType type);
ncclRedOp_t nccl_reduce_op(ReduceOp op);

class NcclCommunicator final : public Communicator {
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

 private:
  // Orders the communicator stream after the default stream, runs `enqueue` inside an NCCL group,
  // records completion.
  template <typename Enqueue>
  WorkPtr run(std::vector<at::Tensor> tensors, Enqueue enqueue);

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace atl::comm
