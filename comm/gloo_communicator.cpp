#include "comm/gloo_communicator.h"

#include <ATen/ATen.h>
#include <csignal>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace atl::comm {
namespace {

uint64_t elapsed_ns(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// c10d's operations in flight, waited for together; `finish` runs once after the last.
class GlooWork final : public Work {
 public:
  GlooWork(const std::string& group, ByteCounters& counters,
           std::vector<c10::intrusive_ptr<c10d::Work>> pending, std::function<void()> finish,
           std::function<void()> on_done)
      : group_(group),
        counters_(counters),
        pending_(std::move(pending)),
        finish_(std::move(finish)),
        on_done_(std::move(on_done)) {}
  ~GlooWork() override {
    if (on_done_) on_done_();
  }

  void wait() override {
    if (done_) return;
    const auto start = std::chrono::steady_clock::now();
    // c10d throws on a peer's failure or the group's timeout; the message names Gloo's reason.
    try {
      for (const auto& work : pending_) work->wait();
    } catch (const std::exception& e) {  // c10::Error, or Gloo's own IoException rethrown
      throw GroupFailure("Gloo group " + group_ +
                         ": an operation failed (a member is gone or timed out): " + one_line_reason(e));
    }
    counters_.add_wait(elapsed_ns(start));
    complete();
  }

  bool test() override {
    if (done_) return true;
    if (std::all_of(pending_.begin(), pending_.end(), [](const auto& w) { return w->isCompleted(); })) wait();
    return done_;
  }

 private:
  void complete() {
    done_ = true;
    pending_.clear();
    if (finish_) std::exchange(finish_, {})();
    if (on_done_) std::exchange(on_done_, {})();
  }

  std::string group_;
  ByteCounters& counters_;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;
  std::function<void()> finish_;
  std::function<void()> on_done_;
  bool done_ = false;
};

void check_gloo_tensor(const at::Tensor& tensor, const char* op) {
  check_contiguous(tensor, op);
  if (!tensor.device().is_cpu())
    throw std::invalid_argument(std::string("Gloo ") + op + ": tensor is on " + tensor.device().str() +
                                "; the islands' TCP group takes host tensors (copy to the CPU first)");
}

c10d::ReduceOp gloo_reduce_op(ReduceOp op) {
  return op == ReduceOp::kMax ? c10d::ReduceOp(c10d::ReduceOp::MAX) : c10d::ReduceOp(c10d::ReduceOp::SUM);
}

}  // namespace

std::string one_line_reason(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  const std::string text = c10_error ? c10_error->what_without_backtrace() : error.what();
  return text.substr(0, text.find('\n'));
}

GlooCommunicator::GlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::string name, const GlooGroupOptions& options)
    : name_(std::move(name)), rank_(rank), size_(size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("Gloo group " + name_ + ": rank " + std::to_string(rank) + " outside " +
                                std::to_string(size) + " members");
  // Gloo writes to its peers with writev and handles EPIPE itself, as in Python, which ignores
  // SIGPIPE; in a C++ process a peer killed mid-write would kill this member too, silently, by that
  // signal (seen once in test_island_rendezvous: a surviving island dead of a signal).
  std::signal(SIGPIPE, SIG_IGN);
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.address));
  try {
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
    // A Gloo pair's one TCP connection carries both directions at about half a link's rate each;
    // point-to-point sends towards lower ranks take connections of their own.
    downward_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("downward", store), rank, size, gloo_options);
  } catch (const c10::Error& e) {
    throw std::runtime_error("Gloo group " + name_ + ": member " + std::to_string(rank) + " of " +
                             std::to_string(size) + " could not connect to its peers within " +
                             std::to_string(options.timeout.count() / 1000) + " s: " + one_line_reason(e));
  }
  label_ = name_ + "[gloo " + std::to_string(size) + "]";
}

WorkPtr GlooCommunicator::make_work(OpKind op, uint64_t wire_bytes, uint64_t tensor_bytes,
                                    std::vector<c10::intrusive_ptr<c10d::Work>> pending,
                                    std::function<void()> finish) {
  counters().add(op, wire_bytes);
  return std::make_shared<GlooWork>(name_, counters(), std::move(pending), std::move(finish),
                                    record_closer(record_start(op, tensor_bytes)));
}

WorkPtr GlooCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  check_gloo_tensor(tensor, "all_reduce");
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  if (size_ > 1 && tensor.numel() > 0) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = gloo_reduce_op(op);
    pending.push_back(group_->allreduce(tensors, options));
  }
  return make_work(OpKind::kAllReduce, ring_wire_bytes(tensor.nbytes(), size_, 2), tensor.nbytes(),
                   std::move(pending), average_finisher(tensor, op, size_));
}

WorkPtr GlooCommunicator::reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) {
  check_gloo_tensor(input, "reduce_scatter");
  check_gloo_tensor(output, "reduce_scatter");
  check_shard("reduce_scatter", input, output, size_, rank_);
  const at::Tensor reduced = input.clone();
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  if (size_ > 1 && input.numel() > 0) {
    std::vector<at::Tensor> tensors{reduced};
    c10d::AllreduceOptions options;
    options.reduceOp = gloo_reduce_op(op);
    pending.push_back(group_->allreduce(tensors, options));
  }
  const ShardRange mine = shard_range(input.numel(), size_, rank_);
  std::function<void()> average = average_finisher(output, op, size_);
  auto keep_slice = [reduced, output, mine, average] {
    output.copy_(reduced.narrow(0, mine.offset, mine.numel));
    if (average) average();
  };
  return make_work(OpKind::kReduceScatter, ring_wire_bytes(input.nbytes(), size_, 2), input.nbytes(),
                   std::move(pending), std::move(keep_slice));
}

WorkPtr GlooCommunicator::all_gather(const at::Tensor& input, const at::Tensor& output) {
  check_gloo_tensor(input, "all_gather");
  check_gloo_tensor(output, "all_gather");
  check_shard("all_gather", output, input, size_, rank_);
  const int64_t n = output.numel();
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  std::function<void()> unpad;
  if (size_ == 1 || n == 0) {
    if (n > 0 && input.data_ptr() != output.data_ptr()) output.copy_(input);
  } else {
    // Every shard padded to the largest (shard 0), gathered into one slot per member.
    const int64_t slot = shard_range(n, size_, 0).numel;
    const at::Tensor padded_input = at::zeros({slot}, input.options());
    padded_input.narrow(0, 0, input.numel()).copy_(input);
    const at::Tensor slots = at::empty({slot * size_}, output.options());
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) outputs[0].push_back(slots.narrow(0, slot * r, slot));
    std::vector<at::Tensor> inputs{padded_input};
    pending.push_back(group_->allgather(outputs, inputs));
    unpad = [slots, output, slot, n, size = size_] {
      for (int r = 0; r < size; ++r) {
        const ShardRange range = shard_range(n, size, r);
        output.narrow(0, range.offset, range.numel).copy_(slots.narrow(0, slot * r, range.numel));
      }
    };
  }
  return make_work(OpKind::kAllGather, ring_wire_bytes(output.nbytes(), size_, 1), output.nbytes(),
                   std::move(pending), std::move(unpad));
}

WorkPtr GlooCommunicator::broadcast(const at::Tensor& tensor, int root) {
  check_gloo_tensor(tensor, "broadcast");
  if (root < 0 || root >= size_)
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " outside group of " +
                                std::to_string(size_));
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  if (size_ > 1 && tensor.numel() > 0) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    pending.push_back(group_->broadcast(tensors, options));
  }
  return make_work(OpKind::kBroadcast, ring_wire_bytes(tensor.nbytes(), size_, 1), tensor.nbytes(),
                   std::move(pending));
}

WorkPtr GlooCommunicator::batch_p2p(const std::vector<P2POp>& ops) {
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  uint64_t sent = 0;
  for (const P2POp& op : ops) {
    const bool is_send = op.kind == P2POp::Kind::kSend;
    check_gloo_tensor(op.tensor, is_send ? "send" : "recv");
    if (op.peer < 0 || op.peer >= size_ || op.peer == rank_)
      throw std::invalid_argument("p2p: peer " + std::to_string(op.peer) +
                                  " is not another member of a group of " + std::to_string(size_));
    // Gloo's unbound buffers post every leg at once, so a batch's order cannot deadlock.
    std::vector<at::Tensor> tensors{op.tensor};
    // Upward (to a higher rank) over group_, downward over downward_: one connection per direction.
    const int from = is_send ? rank_ : op.peer, to = is_send ? op.peer : rank_;
    c10d::ProcessGroupGloo& plane = to > from ? *group_ : *downward_;
    if (is_send) {
      sent += op.tensor.nbytes();
      counters().add(OpKind::kSend, op.tensor.nbytes());
      pending.push_back(plane.send(tensors, op.peer, op.tag));
    } else {
      counters().add(OpKind::kRecv, 0);
      pending.push_back(plane.recv(tensors, op.peer, op.tag));
    }
  }
  // One flight record for the batch; the byte counters were charged per leg above.
  const uint64_t record =
      record_start(sent > 0 ? OpKind::kSend : OpKind::kRecv, sent, /*point_to_point=*/true);
  return std::make_shared<GlooWork>(name_, counters(), std::move(pending), std::function<void()>{},
                                    record_closer(record));
}

void GlooCommunicator::barrier() {
  std::vector<c10::intrusive_ptr<c10d::Work>> pending;
  if (size_ > 1) pending.push_back(group_->barrier());
  make_work(OpKind::kBarrier, 0, 0, std::move(pending))->wait();
}

}  // namespace atl::comm
