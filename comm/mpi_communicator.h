// MPI backend of the Communicator: CPU tensors (and CUDA tensors where MPI is CUDA-aware),
// implemented with MPI's non-blocking collectives so every operation can overlap computation.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace atl::comm {

class MpiRuntime;
class MpiWork;

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor).
  MpiCommunicator(const MpiRuntime& runtime, MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override;
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override;
  WorkPtr broadcast(const at::Tensor& tensor, int root) override;
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  void barrier() override;
  std::shared_ptr<void> progress_in_background() override;

  // Ranks with the same color form a new communicator, ordered by key (MPI_Comm_split).
  // Collective over this communicator.
  std::unique_ptr<MpiCommunicator> split(int color, int key, std::string name) const;
  // A new communicator over the same ranks with its own message space, e.g. for a background
  // thread (checkpoint commit) that must never interleave with training collectives.
  std::unique_ptr<MpiCommunicator> duplicate(std::string name) const;

  MPI_Comm handle() const { return comm_; }
  const MpiRuntime& runtime() const { return runtime_; }

 private:
  // A Work for one operation: counts its bytes (`wire_bytes` under ring costs), starts its flight
  // record (`tensor_bytes`) and closes the record when the operation completes or is dropped.
  std::shared_ptr<MpiWork> make_work(OpKind op, uint64_t wire_bytes, uint64_t tensor_bytes,
                                     std::vector<at::Tensor> keep_alive, std::function<void()> finish = {});

  const MpiRuntime& runtime_;
  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace atl::comm
