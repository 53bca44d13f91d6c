#include "comm/communicator.h"

#include <ATen/ATen.h>

#include "comm/flight_recorder.h"

#include <stdexcept>

namespace atl::comm {

ShardRange shard_range(int64_t numel, int size, int rank) {
  const int64_t base = numel / size;
  const int64_t extra = numel % size;
  const int64_t offset = rank * base + std::min<int64_t>(rank, extra);
  return {offset, base + (rank < extra ? 1 : 0)};
}

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::kAllReduce:
      return "all_reduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllGather:
      return "all_gather";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kCount:
      break;
  }
  return "unknown";
}

uint64_t ByteCounters::total_bytes() const {
  uint64_t total = 0;
  for (const auto& b : bytes_) total += b.load(std::memory_order_relaxed);
  return total;
}

std::vector<double> all_gather_value(Communicator& group, double value) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor all = at::empty({group.size()}, f64);
  group.all_gather(at::full({1}, value, f64), all)->wait();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

std::function<void()> average_finisher(const at::Tensor& tensor, ReduceOp op, int size) {
  if (op != ReduceOp::kAvg || size == 1) return {};
  return [tensor, size] {
    if (at::isFloatingType(tensor.scalar_type()))
      tensor.div_(size);
    else
      tensor.div_(size, "trunc");
  };
}

void check_contiguous(const at::Tensor& tensor, const char* op) {
  if (!tensor.defined()) throw std::invalid_argument(std::string(op) + ": tensor is undefined");
  if (!tensor.is_contiguous())
    throw std::invalid_argument(std::string(op) + ": tensor must be contiguous (call .contiguous() first)");
}

void check_shard(const char* op, const at::Tensor& full, const at::Tensor& shard, int size, int rank) {
  check_contiguous(full, op);
  check_contiguous(shard, op);
  const ShardRange mine = shard_range(full.numel(), size, rank);
  if (shard.numel() != mine.numel || shard.scalar_type() != full.scalar_type())
    throw std::invalid_argument(std::string(op) + ": the shard must hold " + std::to_string(mine.numel) +
                                " elements of " + at::toString(full.scalar_type()) +
                                " (this rank's share of " + std::to_string(full.numel()) + "), got " +
                                std::to_string(shard.numel()) + " of " + at::toString(shard.scalar_type()));
}

WorkPtr Communicator::send(const at::Tensor& tensor, int peer, int tag) {
  return batch_p2p({P2POp{P2POp::Kind::kSend, tensor, peer, tag}});
}

WorkPtr Communicator::recv(const at::Tensor& tensor, int peer, int tag) {
  return batch_p2p({P2POp{P2POp::Kind::kRecv, tensor, peer, tag}});
}

uint64_t Communicator::record_start(OpKind op, uint64_t bytes, bool point_to_point) {
  if (!recorder_ || size() == 1) return 0;
  return recorder_->start(point_to_point ? label() + " p2p" : label(), op, bytes);
}

std::function<void()> Communicator::record_closer(uint64_t record) const {
  if (!recorder_ || record == 0) return {};
  FlightRecorder* recorder = recorder_;
  return [recorder, record] { recorder->finish(record); };
}

}  // namespace atl::comm
