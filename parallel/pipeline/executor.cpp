#include "parallel/pipeline/executor.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <utility>

namespace atl::parallel::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What one microbatch chunk holds between its forward and its backward.
struct Slot {
  at::Tensor input, output, output_grad;
  comm::WorkPtr input_arrival, grad_arrival;
};

// A send in flight: the contiguous buffer it reads (the activation itself, or a copy of a
// non-contiguous one), kept alive until it is done, and the activation whose data may go then.
struct PendingSend {
  comm::WorkPtr work;
  at::Tensor buffer, activation;
};

void wait_for(comm::WorkPtr& work) {
  if (work) work->wait();
  work.reset();
}

// Drops the data of an activation already sent; its autograd node keeps what backward needs.
// Views share storage with other tensors, so freeing them would free nothing.
void release_data(at::Tensor& activation) {
  if (activation.defined() && activation.requires_grad() && !activation.is_view())
    activation.set_data(at::empty({0}, activation.options()));
}

// The schedule must be this stage's, on a pipeline group of as many ranks as it has stages.
void check_stage(const comm::Communicator& group, const PipelineShape& shape) {
  if (group.size() != shape.stages || group.rank() != shape.stage)
    throw std::invalid_argument("pipeline executor: the schedule is for stage " +
                                std::to_string(shape.stage) + " of " + std::to_string(shape.stages) +
                                " but the pipeline group has rank " + std::to_string(group.rank()) + " of " +
                                std::to_string(group.size()));
}

// One run of a schedule on this stage: the microbatch chunks between their forward and backward, the
// batch of transfers being gathered, and the sends still in flight.
class StageRun {
 public:
  StageRun(comm::Communicator& group, const PipelineShape& shape, const StageCallbacks& callbacks,
           at::TensorOptions activations, bool training)
      : group_(group), shape_(shape), callbacks_(callbacks), activations_(activations), training_(training) {}

  // One operation of the list. A run of transfers is one batch (schedule.h): posted when the next
  // compute operation comes.
  void execute(const PipeOp& op) {
    if (!is_communication(op.action)) post_batch();
    const std::pair<int, int> key{op.microbatch, op.chunk};
    Slot& slot = slots_[key];
    switch (op.action) {
      case Action::kRecvForward:
        receive(op, slot.input, slot.input_arrival);
        break;
      case Action::kRecvBackward:
        receive(op, slot.output_grad, slot.grad_arrival);
        break;
      case Action::kForward:
        forward(op, key, slot);
        break;
      case Action::kSendForward:
        send(op, slot.output);
        if (!training_) {
          slots_.erase(key);
          --in_flight_;
        }
        break;
      case Action::kBackward:
        backward(op, key, slot);
        break;
      case Action::kSendBackward:
        send(op, slot.input.grad());
        slots_.erase(key);
        break;
    }
    reap_sends();
  }

  // Posts the last batch and waits for every send; the list must have finished every chunk it began.
  PipelineRunStats finish() {
    post_batch();
    for (PendingSend& s : sends_) s.work->wait();
    if (!slots_.empty())
      throw std::logic_error("pipeline executor: the schedule left " + std::to_string(slots_.size()) +
                             " microbatch chunks unfinished");
    return stats_;
  }

 private:
  void forward(const PipeOp& op, const std::pair<int, int>& key, Slot& slot) {
    wait_for(slot.input_arrival);
    if (slot.input.defined() && training_) slot.input.requires_grad_(true);
    const auto t0 = Clock::now();
    slot.output = callbacks_.forward(op.chunk, op.microbatch, slot.input);
    stats_.compute_seconds += seconds_since(t0);
    stats_.max_in_flight = std::max(stats_.max_in_flight, ++in_flight_);
    if (!training_ && shape_.is_last(op.chunk)) {  // evaluation: the callback has taken the loss
      slots_.erase(key);
      --in_flight_;
    }
  }

  void backward(const PipeOp& op, const std::pair<int, int>& key, Slot& slot) {
    wait_for(slot.grad_arrival);
    if (callbacks_.before_backward) callbacks_.before_backward();
    const auto t0 = Clock::now();
    if (shape_.is_last(op.chunk))
      torch::autograd::backward({slot.output});
    else
      torch::autograd::backward({slot.output}, {slot.output_grad});
    stats_.compute_seconds += seconds_since(t0);
    --in_flight_;
    if (shape_.is_first(op.chunk)) slots_.erase(key);
  }

  void send(const PipeOp& op, const at::Tensor& tensor) {
    // Sequence-parallel activations are transposed layouts: the wire wants contiguous bytes.
    const at::Tensor buffer = tensor.detach().contiguous();
    batch_.push_back({comm::P2POp::Kind::kSend, buffer, peer_stage(op, shape_), message_tag(op, shape_)});
    batch_sends_.push_back({nullptr, buffer, tensor});
  }

  void receive(const PipeOp& op, at::Tensor& buffer, comm::WorkPtr& arrival) {
    buffer = at::empty(callbacks_.activation_shape(op.microbatch), activations_);
    batch_.push_back({comm::P2POp::Kind::kRecv, buffer, peer_stage(op, shape_), message_tag(op, shape_)});
    batch_arrivals_.push_back(&arrival);
  }

  void post_batch() {
    if (batch_.empty()) return;
    const comm::WorkPtr work = group_.batch_p2p(batch_);
    for (comm::WorkPtr* arrival : batch_arrivals_) *arrival = work;
    for (PendingSend& s : batch_sends_)
      sends_.push_back({work, std::move(s.buffer), std::move(s.activation)});
    batch_.clear();
    batch_arrivals_.clear();
    batch_sends_.clear();
  }

  // Completed sends release their activations; testing also lets MPI progress the rest.
  void reap_sends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      if (!it->work->test()) {
        ++it;
        continue;
      }
      release_data(it->activation);
      it = sends_.erase(it);
    }
  }

  comm::Communicator& group_;
  const PipelineShape& shape_;
  const StageCallbacks& callbacks_;
  const at::TensorOptions activations_;  // of the receive buffers
  const bool training_;
  PipelineRunStats stats_;
  std::map<std::pair<int, int>, Slot> slots_;  // by (microbatch, chunk)
  std::vector<PendingSend> sends_;
  int in_flight_ = 0;
  // The transfers of one batch (a run of consecutive transfers in the list), posted together.
  std::vector<comm::P2POp> batch_;
  std::vector<comm::WorkPtr*> batch_arrivals_;  // the slots' arrival handles its receives complete
  std::vector<PendingSend> batch_sends_;
};

}  // namespace

PipelineExecutor::PipelineExecutor(comm::Communicator& pp_group, at::ScalarType dtype, c10::Device device)
    : group_(pp_group), dtype_(dtype), device_(device) {}

PipelineRunStats PipelineExecutor::run(const PipelineShape& shape, const std::vector<PipeOp>& ops,
                                       const StageCallbacks& callbacks) {
  check_stage(group_, shape);
  // Every neighbour of this stage connected before the first transfer, on every stage at once.
  if (!connected_ && shape.stages > 1) {
    group_.connect_peers(neighbour_stages(ops, shape));
    connected_ = true;
  }
  const bool training = at::GradMode::is_enabled();
  // Sends posted before a long forward must not wait for its end to move (background_progress.h).
  const std::shared_ptr<void> progress = shape.stages > 1 ? group_.progress_in_background() : nullptr;
  const auto start = Clock::now();
  StageRun stage(group_, shape, callbacks, at::TensorOptions().dtype(dtype_).device(device_), training);
  for (const PipeOp& op : ops) stage.execute(op);
  PipelineRunStats stats = stage.finish();
  stats.seconds = seconds_since(start);
  return stats;
}

}  // namespace atl::parallel::pipeline
