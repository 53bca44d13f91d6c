// Trainer: one rank's training loop. Agrees with the other ranks that the start-up checks passed
// (startup.h), builds the parallel layout (parallelize.h) and the checkpoints from a Config, resumes
// if asked, then runs steps: microbatches through the pipeline schedule with gradient reductions
// overlapped with backward, global-norm clipping, AdamW, the islands' outer step, progress lines and
// metrics.jsonl on rank 0, validation every eval_every steps, checkpoints every checkpoint.every steps.
#pragma once

#include <ATen/core/Tensor.h>

#include <iosfwd>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/launch_environment.h"
#include "runtime/metrics/metrics.h"
#include "runtime/startup.h"

namespace atl::comm {
class MpiCommunicator;
class DeviceMesh;
}  // namespace atl::comm

namespace atl::optim::outer {
class OuterOptimizer;
}  // namespace atl::optim::outer

namespace atl::parallel {
class FlatParameters;
struct ModelStateBytes;
}  // namespace atl::parallel

namespace atl::runtime {

// Thrown by run() under train.on_nonfinite = stop after committing a checkpoint of the state before
// the bad step; the same message on every rank of the island.
class NonFiniteStop : public std::runtime_error {
 public:
  explicit NonFiniteStop(const std::string& message);
};

class Trainer {
 public:
  // Collective over `world`. `out` receives rank 0's start-up table and progress lines (null: quiet).
  // `environment`: what `atoll train` read from its process environment (progress bar, placement,
  // test hooks). Throws ConfigError, StartupError or PeerFailure (startup.h) on bad input.
  Trainer(const Config& config, const comm::MpiCommunicator& world, std::ostream* out,
          const LaunchEnvironment& environment = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step; the returned loss is the mean over the whole global batch.
  StepMetrics train_step();
  // Mean validation loss over train.eval_sequences sequences from the start of the val shard.
  double evaluate();
  // Islands with an outer optimizer: evaluate() of the outer parameters phi (what the islands agree
  // on) instead of this island's theta, which is put back afterwards. Collective within the island.
  double evaluate_outer();
  // The outer optimizer's phi and momentum in the inner optimizer's coordinates (null without one).
  const optim::outer::OuterOptimizer* outer_optimizer() const;
  // Runs train.steps steps (from the resumed step) with logging, periodic validation and
  // checkpoints every checkpoint.every steps and after the last one.
  void run();
  // The signal (SIGTERM, SIGUSR1) that made run() stop early after committing a checkpoint; 0 if none.
  int preempted_by() const;
  // Saves and commits a checkpoint of the current state; returns its directory. Collective.
  std::string save_checkpoint();

  int64_t step() const;
  // This rank's parameter buffers. Under ZeRO-3 their data is present only while a unit is in use:
  // read parameters through full_parameters() instead.
  const parallel::FlatParameters& parameters() const;
  // This rank's piece (tensor- and pipeline-parallel, never dp-sharded) of every parameter, by
  // canonical name, as copies. Collective over the dp group under ZeRO.
  std::map<std::string, at::Tensor> full_parameters();
  // Bytes of model state this rank holds now (live allocations).
  parallel::ModelStateBytes model_state_bytes() const;
  const comm::DeviceMesh& mesh() const;

 private:
  // The end of step `step`: the checkpoint, validation and sample due at it.
  void end_of_step(int64_t step);
  // A committed checkpoint of the current step, saved now unless end_of_step just saved it.
  std::string commit_now();

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace atl::runtime
