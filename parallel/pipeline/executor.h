// Runs one stage's pipeline schedule (schedule.h) over the pipeline group: posts the transfers the
// list names without blocking, waits for a received tensor only right before the compute operation
// that needs it, runs forwards and backwards through caller-supplied callbacks, and frees each
// activation's data as soon as it has been sent (its autograd graph stays, so backward still works:
// Megatron's deallocate-output trick). Gradients accumulate in the parameters' .grad across
// microbatches; reducing them is the caller's business (ShardedDataParallel's hooks fire as usual).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "parallel/pipeline/schedule.h"

namespace atl::parallel::pipeline {

struct StageCallbacks {
  // Runs model chunk `chunk` on microbatch `microbatch`. `input` is the received activation (a
  // leaf requiring grad when grad mode is on), undefined on the first virtual stage. Returns the
  // activation for the next virtual stage, or on the last virtual stage the loss to backpropagate.
  std::function<at::Tensor(int chunk, int microbatch, const at::Tensor& input)> forward;
  // Shape of the activations exchanged between chunks for `microbatch` (and of their gradients).
  std::function<std::vector<int64_t>(int microbatch)> activation_shape;
  // Optional: runs right before each backward of a chunk (the data-parallel engine counts a
  // parameter's gradients per backward).
  std::function<void()> before_backward;
};

struct PipelineRunStats {
  double seconds = 0.0;          // wall time of the whole list
  double compute_seconds = 0.0;  // inside forward and backward (the rest is waiting: the bubble)
  int max_in_flight = 0;         // most microbatch chunks holding activations at once
  double idle_fraction() const { return seconds > 0 ? 1.0 - compute_seconds / seconds : 0.0; }
};

class PipelineExecutor {
 public:
  // `pp_group`: rank i is pipeline stage i. `dtype`: of the activations exchanged.
  PipelineExecutor(comm::Communicator& pp_group, at::ScalarType dtype, c10::Device device = c10::kCPU);

  // Runs `ops` (built for `shape`) to completion; every transfer has finished when it returns.
  PipelineRunStats run(const PipelineShape& shape, const std::vector<PipeOp>& ops,
                       const StageCallbacks& callbacks);

 private:
  comm::Communicator& group_;
  bool connected_ = false;  // the stage's neighbours connected (Communicator::connect_peers)
  at::ScalarType dtype_;
  c10::Device device_;  // of the activations and the receive buffers
};

}  // namespace atl::parallel::pipeline
