// Gloo backend of the Communicator: CPU tensors over TCP between processes that share no MPI
// world -- the islands of separate jobs, which must not die together (an MPI world aborts as one).
//
// It wraps LibTorch's c10d::ProcessGroupGloo (the engine torchft builds its fault-tolerant groups
// on) and meets its peers through a c10d::Store (a TCPStore served by the rendezvous). A group
// lives for one membership: when islands come or go, the caller builds a new one under a new
// store prefix (c10d groups are not resized in place).
//
// Gloo has no average and reduce-scatter only in some LibTorch versions, so kAvg is a sum divided
// here and reduce_scatter is an all-reduce whose slice is kept (twice reduce-scatter's bytes; the
// islands' exchange uses all-gather and point-to-point only). Uneven all-gather shards travel padded
// to the largest one.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

#include "comm/communicator.h"

namespace atl::comm {

// The reason in a c10d or Gloo error, on one line (c10's what() carries a C++ backtrace).
std::string one_line_reason(const std::exception& error);

struct GlooGroupOptions {
  // The address this process's Gloo device binds to and advertises to its peers (an interface's
  // address, or a name resolving to one; 127.0.0.1 on one machine).
  std::string address = "127.0.0.1";
  // Longest an operation or the group's creation may wait for a peer before it fails.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class GlooCommunicator final : public Communicator {
 public:
  // Joins the group of `size` members as `rank`, meeting through `store` (already prefixed for
  // this group: every member must pass the same prefix and no other group may use it). Blocks until
  // every member has joined; throws std::runtime_error naming the group after `options.timeout`.
  GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::string name,
                   const GlooGroupOptions& options);

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
  // Counts `wire_bytes`, records the operation and wraps c10d's handles: wait() waits for every one
  // of them, then runs `finish` (copies out of staging tensors) once.
  WorkPtr make_work(OpKind op, uint64_t wire_bytes, uint64_t tensor_bytes,
                    std::vector<c10::intrusive_ptr<c10d::Work>> pending, std::function<void()> finish = {});

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> downward_;  // point-to-point towards lower ranks
  std::string name_;
  int rank_;
  int size_;
};

}  // namespace atl::comm
