// Trainer: one rank's training loop. Builds the mesh, the model over flat parameters, the
// data-parallel reducer and the optimizer from a Config, then runs steps: microbatches with
// gradient accumulation, one bucketed all-reduce overlapped with the last backward, global-norm
// clipping, AdamW, progress lines and metrics.jsonl on rank 0, validation every eval_every steps.
#pragma once

#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <vector>

#include "runtime/config.h"
#include "runtime/metrics.h"

namespace atl::comm {
class MpiCommunicator;
class DeviceMesh;
}  // namespace atl::comm

namespace atl::parallel {
class FlatParameters;
}

namespace atl::runtime {

// Thrown on the ranks whose own start-up checks passed when another rank's failed: that rank
// reports the problem, the others exit non-zero without repeating it.
class PeerFailure : public std::runtime_error {
 public:
  explicit PeerFailure(int failed_rank);
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

class Trainer {
 public:
  // Collective over `world`. `out` receives rank 0's start-up table and progress lines (null: quiet).
  // Throws std::invalid_argument / std::runtime_error with one line per problem on bad input.
  Trainer(const Config& config, const comm::MpiCommunicator& world, std::ostream* out);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step; the returned loss is the mean over the whole global batch.
  StepMetrics train_step();
  // Mean validation loss over train.eval_sequences sequences from the start of the val shard.
  double evaluate();
  // Runs train.steps steps with logging and periodic validation.
  void run();

  int64_t step() const;
  const parallel::FlatParameters& parameters() const;
  const comm::DeviceMesh& mesh() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Threads per rank for run.threads = 0: the cores of this node divided by the ranks on it.
int default_threads_per_rank(const comm::MpiCommunicator& world);

}  // namespace atl::runtime
