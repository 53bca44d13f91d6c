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

}  // namespace

PipelineExecutor::PipelineExecutor(comm::Communicator& pp_group, at::ScalarType dtype, c10::Device device)
    : group_(pp_group), dtype_(dtype), device_(device) {}

PipelineRunStats PipelineExecutor::run(const PipelineShape& shape, const std::vector<PipeOp>& ops,
                                       const StageCallbacks& callbacks) {
  if (group_.size() != shape.stages || group_.rank() != shape.stage)
    throw std::invalid_argument("pipeline executor: the schedule is for stage " +
                                std::to_string(shape.stage) + " of " + std::to_string(shape.stages) +
                                " but the pipeline group has rank " + std::to_string(group_.rank()) + " of " +
                                std::to_string(group_.size()));
  // Every neighbour of this stage connected before the first transfer, on every stage at once.
  if (!connected_ && shape.stages > 1) {
    group_.connect_peers(neighbour_stages(ops, shape));
    connected_ = true;
  }
  const bool training = at::GradMode::is_enabled();
  // Sends posted before a long forward must not wait for its end to move (background_progress.h).
  const std::shared_ptr<void> progress = shape.stages > 1 ? group_.progress_in_background() : nullptr;
  const auto start = Clock::now();
  PipelineRunStats stats;
  std::map<std::pair<int, int>, Slot> slots;  // by (microbatch, chunk)
  std::vector<PendingSend> sends;
  int in_flight = 0;

  // The transfers of one batch (a run of consecutive transfers in `ops`), posted together.
  std::vector<comm::P2POp> batch;
  std::vector<comm::WorkPtr*> batch_arrivals;  // the slots' arrival handles its receives complete
  std::vector<PendingSend> batch_sends;
  const auto send = [&](const PipeOp& op, const at::Tensor& tensor) {
    // Sequence-parallel activations are transposed layouts: the wire wants contiguous bytes.
    const at::Tensor buffer = tensor.detach().contiguous();
    batch.push_back({comm::P2POp::Kind::kSend, buffer, peer_stage(op, shape), message_tag(op, shape)});
    batch_sends.push_back({nullptr, buffer, tensor});
  };
  const auto receive = [&](const PipeOp& op, at::Tensor& buffer, comm::WorkPtr& arrival) {
    buffer = at::empty(callbacks.activation_shape(op.microbatch),
                       at::TensorOptions().dtype(dtype_).device(device_));
    batch.push_back({comm::P2POp::Kind::kRecv, buffer, peer_stage(op, shape), message_tag(op, shape)});
    batch_arrivals.push_back(&arrival);
  };
  const auto post_batch = [&] {
    if (batch.empty()) return;
    const comm::WorkPtr work = group_.batch_p2p(batch);
    for (comm::WorkPtr* arrival : batch_arrivals) *arrival = work;
    for (PendingSend& s : batch_sends) sends.push_back({work, std::move(s.buffer), std::move(s.activation)});
    batch.clear();
    batch_arrivals.clear();
    batch_sends.clear();
  };
  // Completed sends release their activations; testing also lets MPI progress the rest.
  const auto reap_sends = [&] {
    for (auto it = sends.begin(); it != sends.end();) {
      if (!it->work->test()) {
        ++it;
        continue;
      }
      release_data(it->activation);
      it = sends.erase(it);
    }
  };

  for (const PipeOp& op : ops) {
    // A run of transfers is one batch (schedule.h): posted when the next compute operation comes.
    if (!is_communication(op.action)) post_batch();
    const std::pair<int, int> key{op.microbatch, op.chunk};
    Slot& slot = slots[key];
    switch (op.action) {
      case Action::kRecvForward:
        receive(op, slot.input, slot.input_arrival);
        break;
      case Action::kRecvBackward:
        receive(op, slot.output_grad, slot.grad_arrival);
        break;
      case Action::kForward: {
        wait_for(slot.input_arrival);
        if (slot.input.defined() && training) slot.input.requires_grad_(true);
        const auto t0 = Clock::now();
        slot.output = callbacks.forward(op.chunk, op.microbatch, slot.input);
        stats.compute_seconds += seconds_since(t0);
        stats.max_in_flight = std::max(stats.max_in_flight, ++in_flight);
        if (!training && shape.is_last(op.chunk)) {  // evaluation: the callback has taken the loss
          slots.erase(key);
          --in_flight;
        }
        break;
      }
      case Action::kSendForward:
        send(op, slot.output);
        if (!training) {
          slots.erase(key);
          --in_flight;
        }
        break;
      case Action::kBackward: {
        wait_for(slot.grad_arrival);
        const auto t0 = Clock::now();
        if (shape.is_last(op.chunk))
          torch::autograd::backward({slot.output});
        else
          torch::autograd::backward({slot.output}, {slot.output_grad});
        stats.compute_seconds += seconds_since(t0);
        --in_flight;
        if (shape.is_first(op.chunk)) slots.erase(key);
        break;
      }
      case Action::kSendBackward:
        send(op, slot.input.grad());
        slots.erase(key);
        break;
    }
    reap_sends();
  }
  post_batch();
  for (PendingSend& s : sends) s.work->wait();
  if (!slots.empty())
    throw std::logic_error("pipeline executor: the schedule left " + std::to_string(slots.size()) +
                           " microbatch chunks unfinished");
  stats.seconds = seconds_since(start);
  return stats;
}

}  // namespace atl::parallel::pipeline
