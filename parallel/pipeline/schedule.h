// Pipeline schedules (DESIGN §5) as pure functions: for one stage, the ordered list of operations it
// runs in one optimizer step. The executor (executor.h) runs any such list; the unit tests play all
// stages' lists together to prove them deadlock-free.
//
// Virtual stages: with v model chunks per rank, chunk c of stage r is virtual stage c * p + r, so
// activations flow 0 -> 1 -> ... -> p-1 -> (chunk 1 on) 0 -> ... (Megatron's interleaved layout).
//
// Communication is explicit and batched: compute operations run in groups (one each, or in the
// interleaved steady state a forward with its backward), and after each group the list holds one run
// of transfers -- the sends of what the group produced and the receives the next group needs -- that
// the executor posts as one batch (one NCCL group) and waits on only before the compute operation
// that needs a tensor from it. Every schedule is deadlock-free both under MPI's semantics and on
// NCCL's in-order streams, with transfers between two stages posted in the same order at both ends
// (the unit tests play all stages together under each).
#pragma once

#include <string>
#include <vector>

namespace atl::parallel::pipeline {

enum class Action { kRecvForward, kForward, kSendForward, kRecvBackward, kBackward, kSendBackward };
const char* action_name(Action action);
bool is_communication(Action action);

struct PipeOp {
  Action action;
  int microbatch;
  int chunk;  // model chunk on this rank (0 without virtual stages)
  bool operator==(const PipeOp& other) const {
    return action == other.action && microbatch == other.microbatch && chunk == other.chunk;
  }
};

struct PipelineShape {
  int stage = 0;  // this rank's position in the pipeline group
  int stages = 1;
  int microbatches = 1;
  int virtual_stages = 1;  // model chunks per rank

  int virtual_stage(int chunk) const { return chunk * stages + stage; }
  int total_virtual_stages() const { return stages * virtual_stages; }
  bool is_first(int chunk) const { return virtual_stage(chunk) == 0; }
  bool is_last(int chunk) const { return virtual_stage(chunk) == total_virtual_stages() - 1; }
};

enum class ScheduleKind { kGPipe, kOneFOneB, kInterleaved };
// The schedule `kind` runs as on `stages` stages: with one stage there is nothing to interleave,
// and interleaved 1F1B is plain 1F1B.
ScheduleKind schedule_on_stages(ScheduleKind kind, int stages);

// Forwards a stage runs before its first backward: GPipe all m; 1F1B min(p - r - 1, m);
// interleaved min(2 (p - r - 1) + (v - 1) p, m v) (Megatron's counts).
int warmup_forwards(ScheduleKind kind, const PipelineShape& shape);

// The whole step for one stage. Requirements (std::invalid_argument otherwise): v = 1 except for
// interleaved; interleaved needs p >= 2 and m a multiple of p (it runs microbatches in rounds of p).
std::vector<PipeOp> build_schedule(ScheduleKind kind, const PipelineShape& shape);

// Forwards only (evaluation): each microbatch through every chunk in turn, no backward.
std::vector<PipeOp> forward_only_schedule(const PipelineShape& shape);

// The pipeline stage a communication operation talks to.
int peer_stage(const PipeOp& op, const PipelineShape& shape);
// The stages a stage's list talks to, ascending, each once: the pairs to connect before the list
// runs (Communicator::connect_peers). Symmetric over the stages of one schedule, and the same for a
// shape's training and forward-only lists (tests/unit/test_pipeline_schedule.cpp).
std::vector<int> neighbour_stages(const std::vector<PipeOp>& ops, const PipelineShape& shape);
// The message tag both ends of a transfer use: direction, microbatch (mod 128: a window far wider
// than the microbatches ever in flight) and the receiving virtual stage.
int message_tag(const PipeOp& op, const PipelineShape& shape);

}  // namespace atl::parallel::pipeline
