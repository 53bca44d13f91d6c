// A group of one process, without MPI: what `atoll eval` and `atoll sample` run the model's
// tensor-parallel code on when they load a checkpoint of any layout into one process. Every
// collective of a group of one leaves the data as it is (or copies it to the output); there is no
// peer to send to.
#pragma once

#include <string>

#include "comm/communicator.h"

namespace atl::comm {

class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(std::string name = "self") : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override;
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override;
  WorkPtr broadcast(const at::Tensor& tensor, int root) override;
  // std::logic_error: a group of one has no peer.
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  void barrier() override {}

 private:
  std::string name_;
};

}  // namespace atl::comm
