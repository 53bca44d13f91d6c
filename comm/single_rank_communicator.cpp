#include "comm/single_rank_communicator.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace atl::comm {

WorkPtr SingleRankCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp) {
  check_contiguous(tensor, "all_reduce");
  counters().add(OpKind::kAllReduce, 0);     // counted as every plane counts a call: nothing on the wire
  return std::make_shared<CompletedWork>();  // sum, average and max of one value are the value
}

WorkPtr SingleRankCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp) {
  check_shard("reduce_scatter", input, output, 1, 0);
  if (!output.is_same(input)) output.copy_(input);
  counters().add(OpKind::kReduceScatter, 0);
  return std::make_shared<CompletedWork>();
}

WorkPtr SingleRankCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  check_shard("all_gather", output, input, 1, 0);
  if (!output.is_same(input)) output.copy_(input);
  counters().add(OpKind::kAllGather, 0);
  return std::make_shared<CompletedWork>();
}

WorkPtr SingleRankCommunicator::broadcast(const at::Tensor& tensor, int root) {
  if (root != 0)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " in a group of one");
  check_contiguous(tensor, "broadcast");
  counters().add(OpKind::kBroadcast, 0);
  return std::make_shared<CompletedWork>();
}

WorkPtr SingleRankCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  if (ops.empty()) return std::make_shared<CompletedWork>();
  throw std::logic_error(name_ + ": point-to-point to rank " + std::to_string(ops.front().peer) +
                         " in a group of one process");
}

}  // namespace atl::comm
