// One rank's passes of the model through the pipeline schedule: a training step's microbatches
// forward and backward (this rank's share of the global batch), and validation's forward-only pass
// over the fixed validation sequences. Tokens go to the device before the schedule starts, only on
// ranks that run an end of the model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "parallel/pipeline/executor.h"
#include "runtime/config/config.h"
#include "runtime/data/batches.h"
#include "runtime/parallelize.h"

namespace atl::runtime {

class PipelinePasses {
 public:
  // `layout` and `data` outlive this.
  PipelinePasses(const Config& config, const ParallelLayout& layout, const TrainingData& data)
      : config_(config), layout_(layout), data_(data) {}

  // Step `step`'s microbatches forward and backward (0-based: the step about to run). On the last
  // stage `local_loss` (a double scalar on the device) accumulates the sum of the microbatch losses
  // / microbatches where the loss is computed, read once after the pipeline (a GPU is not
  // synchronised per microbatch). `poison`: the loss is made NaN (the failure tests' nan_gradient).
  parallel::pipeline::PipelineRunStats train(int64_t step, const at::Tensor& local_loss, bool poison) const;

  // The mean loss over train.eval_sequences sequences from the start of the val shard, this dp
  // rank's share in chunks of one microbatch. Collective over the pp and dp groups.
  double validation_loss() const;

 private:
  // A microbatch as this rank's model chunks take it, on the device: its tokens (this rank's two
  // chunks of each sequence under context parallelism) on a rank that runs an end of the model, and
  // with model.document_mask every position's document in the whole sequences, on every rank.
  struct Microbatch {
    at::Tensor inputs, targets;  // int64 [count, seq / cp]
    at::Tensor document_ids;     // int64 [count, seq]
  };
  // Runs model chunk `chunk` on `batch`'s inputs (first virtual stage) or on `input`; returns the
  // activation for the next virtual stage, or on the last one the mean loss over `batch`'s targets.
  at::Tensor forward_chunk(int chunk, const at::Tensor& input, const Microbatch& batch) const;
  // `count` microbatches (`load(micro)`) as this rank's chunks take them.
  std::vector<Microbatch> stage_batches(int count, const std::function<TokenBatch(int)>& load) const;
  // What this rank's chunks take of the sequences of `batch`; `tokens`: whether they take its tokens.
  Microbatch microbatch_of(const TokenBatch& batch, bool tokens) const;
  // Every island takes its own share of each step's sequences: rank d of island i reads share
  // i*dp + d of islands*dp.
  int data_rank() const;
  int data_ranks() const;

  const Config& config_;
  const ParallelLayout& layout_;
  const TrainingData& data_;
};

}  // namespace atl::runtime
