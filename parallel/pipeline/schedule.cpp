#include "parallel/pipeline/schedule.h"

#include <algorithm>
#include <stdexcept>

namespace atl::parallel::pipeline {
namespace {

// One compute operation in the order a schedule runs them. `batch_after`: the transfers it sends
// are posted right after it; otherwise they wait for the next compute operation's batch.
struct Compute {
  bool forward;
  int microbatch;
  int chunk;
  bool batch_after = true;
};

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument("pipeline schedule: " + message);
}

void check_shape(const PipelineShape& s) {
  require(s.stages >= 1 && s.stage >= 0 && s.stage < s.stages, "stage outside [0, stages)");
  require(s.microbatches >= 1, "needs at least one microbatch");
  require(s.virtual_stages >= 1, "virtual_stages must be >= 1");
}

// Adds the communication: compute operations run in groups (each one alone, or with `batch_after`
// unset the next one with it), and after each group one batch holds the sends of what the group
// produced and the receives the next group needs; the first group's receives come before it. A send
// and the neighbour's matching receive thus always sit in batches that can run at the same time, so
// the schedule cannot deadlock on in-order streams (NCCL), as Megatron pairs send-forward with
// recv-backward. Virtual stages at either end of the model neither receive nor send.
std::vector<PipeOp> with_communication(const PipelineShape& shape, const std::vector<Compute>& order) {
  std::vector<PipeOp> ops;
  const auto receives_of_group = [&](size_t first) {
    for (size_t i = first; i < order.size(); ++i) {
      const Compute& c = order[i];
      if (c.forward && !shape.is_first(c.chunk)) ops.push_back({Action::kRecvForward, c.microbatch, c.chunk});
      if (!c.forward && !shape.is_last(c.chunk))
        ops.push_back({Action::kRecvBackward, c.microbatch, c.chunk});
      if (c.batch_after) break;
    }
  };
  receives_of_group(0);
  std::vector<PipeOp> sends;  // of the group running
  for (size_t i = 0; i < order.size(); ++i) {
    const Compute& c = order[i];
    ops.push_back({c.forward ? Action::kForward : Action::kBackward, c.microbatch, c.chunk});
    if (c.forward && !shape.is_last(c.chunk)) sends.push_back({Action::kSendForward, c.microbatch, c.chunk});
    if (!c.forward && !shape.is_first(c.chunk))
      sends.push_back({Action::kSendBackward, c.microbatch, c.chunk});
    if (!c.batch_after && i + 1 < order.size()) continue;
    ops.insert(ops.end(), sends.begin(), sends.end());
    sends.clear();
    receives_of_group(i + 1);
  }
  return ops;
}

// Warmup forwards, then one forward and one backward alternately, then the remaining backwards.
// forward_at(k) / backward_at(k) name the k-th forward / backward of the stage. `paired_steady`: each
// steady-state forward shares its backward's batch.
template <typename ForwardAt, typename BackwardAt>
std::vector<Compute> warmup_steady_cooldown(int total, int warmup, ForwardAt forward_at,
                                            BackwardAt backward_at, bool paired_steady = false) {
  std::vector<Compute> order;
  for (int k = 0; k < warmup; ++k) order.push_back(forward_at(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forward_at(warmup + k));
    order.back().batch_after = !paired_steady;
    order.push_back(backward_at(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backward_at(k));
  return order;
}

}  // namespace

const char* action_name(Action action) {
  switch (action) {
    case Action::kRecvForward:
      return "recv_forward";
    case Action::kForward:
      return "forward";
    case Action::kSendForward:
      return "send_forward";
    case Action::kRecvBackward:
      return "recv_backward";
    case Action::kBackward:
      return "backward";
    case Action::kSendBackward:
      return "send_backward";
  }
  return "?";
}

bool is_communication(Action action) {
  return action != Action::kForward && action != Action::kBackward;
}

ScheduleKind schedule_on_stages(ScheduleKind kind, int stages) {
  return stages == 1 && kind == ScheduleKind::kInterleaved ? ScheduleKind::kOneFOneB : kind;
}

int warmup_forwards(ScheduleKind kind, const PipelineShape& s) {
  const int later_stages = s.stages - s.stage - 1;
  switch (kind) {
    case ScheduleKind::kGPipe:
      return s.microbatches;
    case ScheduleKind::kOneFOneB:
      return std::min(later_stages, s.microbatches);
    case ScheduleKind::kInterleaved:
      return std::min(2 * later_stages + (s.virtual_stages - 1) * s.stages,
                      s.microbatches * s.virtual_stages);
  }
  return 0;
}

std::vector<PipeOp> build_schedule(ScheduleKind kind, const PipelineShape& shape) {
  check_shape(shape);
  const int p = shape.stages, m = shape.microbatches, v = shape.virtual_stages;
  if (kind != ScheduleKind::kInterleaved) {
    require(v == 1, "virtual stages need the interleaved schedule");
    const auto forward_at = [](int k) { return Compute{true, k, 0}; };
    const auto backward_at = [](int k) { return Compute{false, k, 0}; };
    return with_communication(
        shape, warmup_steady_cooldown(m, warmup_forwards(kind, shape), forward_at, backward_at));
  }
  require(p >= 2, "interleaved needs at least 2 stages");
  require(m % p == 0, "interleaved runs microbatches in rounds of the stage count; microbatches " +
                          std::to_string(m) + " is not a multiple of " + std::to_string(p));
  // The k-th forward walks the chunks in rounds of p microbatches: microbatches 0..p-1 through
  // chunk 0, then through chunk 1, ...; backwards walk the chunks in reverse.
  const auto microbatch_of = [p, v](int k) { return k / (p * v) * p + k % p; };
  const auto forward_at = [=](int k) { return Compute{true, microbatch_of(k), k % (p * v) / p}; };
  const auto backward_at = [=](int k) { return Compute{false, microbatch_of(k), v - 1 - k % (p * v) / p}; };
  // Interleaved stages hand chunks back and forth both ways in the steady state: one batch per
  // forward-backward pair (Megatron's send_forward_backward_recv_forward_backward).
  return with_communication(shape, warmup_steady_cooldown(m * v, warmup_forwards(kind, shape), forward_at,
                                                          backward_at, /*paired_steady=*/true));
}

std::vector<PipeOp> forward_only_schedule(const PipelineShape& shape) {
  check_shape(shape);
  std::vector<Compute> order;
  for (int mb = 0; mb < shape.microbatches; ++mb)
    for (int chunk = 0; chunk < shape.virtual_stages; ++chunk) order.push_back({true, mb, chunk});
  return with_communication(shape, order);
}

namespace {

// The virtual stage at the other end of a transfer, and whether the transfer carries activations.
int other_virtual_stage(const PipeOp& op, const PipelineShape& shape) {
  const int own = shape.virtual_stage(op.chunk);
  switch (op.action) {
    case Action::kRecvForward:
    case Action::kSendBackward:
      return own - 1;
    case Action::kSendForward:
    case Action::kRecvBackward:
      return own + 1;
    default:
      throw std::invalid_argument(std::string("pipeline: ") + action_name(op.action) + " is not a transfer");
  }
}

}  // namespace

int peer_stage(const PipeOp& op, const PipelineShape& shape) {
  return other_virtual_stage(op, shape) % shape.stages;
}

std::vector<int> neighbour_stages(const std::vector<PipeOp>& ops, const PipelineShape& shape) {
  std::vector<int> stages;
  for (const PipeOp& op : ops)
    if (is_communication(op.action)) stages.push_back(peer_stage(op, shape));
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

int message_tag(const PipeOp& op, const PipelineShape& shape) {
  const bool receiving = op.action == Action::kRecvForward || op.action == Action::kRecvBackward;
  const int receiver = receiving ? shape.virtual_stage(op.chunk) : other_virtual_stage(op, shape);
  const bool activation = op.action == Action::kRecvForward || op.action == Action::kSendForward;
  return ((op.microbatch % 128) * shape.total_virtual_stages() + receiver) * 2 + (activation ? 0 : 1);
}

}  // namespace atl::parallel::pipeline
