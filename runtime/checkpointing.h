// The trainer's side of checkpointing (DESIGN §7): which runs of which tensors this rank saves and
// loads -- parameter values (fp32, the master weights under mixed precision), AdamW moments and
// with islands the outer optimizer's state, in global form so any layout can read them -- and the
// resume policy: `auto` takes the newest
// checkpoint that loads cleanly, skipping damaged ones with a line saying why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/async_saver.h"
#include "checkpoint/checkpoint_store.h"
#include "comm/device_mesh.h"
#include "comm/mpi_communicator.h"
#include "optim/adamw.h"
#include "optim/outer/outer_optimizer.h"
#include "parallel/sharded_data_parallel.h"
#include "runtime/config/config.h"
#include "runtime/test_hooks.h"

namespace atl::runtime {

class TrainerCheckpoints {
 public:
  // Collective over `world`: creates the checkpoint communicator and removes `.partial` leftovers.
  // `hooks`: the checkpoint tests' fault point and snapshot-copy delay (none in real runs).
  // `tokenizer_model`: data.tokenizer serialized (the trainer loaded it), "" for bytes.
  TrainerCheckpoints(const Config& config, const comm::MpiCommunicator& world, const comm::DeviceMesh& mesh,
                     const parallel::FlatParameters& params, parallel::ShardedDataParallel& data_parallel,
                     optim::FlatAdamW& optimizer, optim::outer::OuterOptimizer* outer, const TestHooks& hooks,
                     std::string tokenizer_model);

  // Loads the checkpoint checkpoint.resume names (auto: the newest usable one in the directory);
  // returns the step to continue from, 0 when there is nothing to resume. Throws
  // checkpoint::CheckpointError, the same on every rank, for resume: PATH that does not load, auto
  // with only damaged checkpoints, a checkpoint of another model, or -- islands as separate jobs --
  // islands that resumed from different steps. Collective (over the island group too).
  int64_t resume(const std::function<void(const std::string&)>& log);
  // Saves the state after `step` optimizer steps (checkpoint.mode: sync commits before returning;
  // async and async_lazy return while a background thread writes and commits). Returns the
  // directory. Collective.
  std::string save(int64_t step);
  // Before the state changes in place (the optimizer step): waits for a lazy snapshot to be taken;
  // returns the seconds it blocked.
  double fence();
  // Waits for the save in flight to commit; returns its directory ("" if none), rethrows its error.
  std::string finish();
  // After finish(): "checkpoints: N saved; training waited W s for them, writing them took B s in
  // the background" (async modes) -- the stall the background saves spared -- or, in sync mode,
  // the time training stopped for them. Empty when none was saved.
  std::string costs_line() const;

 private:
  std::string save_now(int64_t step);  // save() without its accounting
  // What this rank saves or loads. Islands each save their own copy (island = this island); a
  // resume into k islands loads saved island (this island mod the saved count). The outer roles
  // come along when `outer_state`; the exchange in flight when `in_flight` is defined; the top-k
  // error feedback when `error_feedback` (and the outer optimizer keeps one).
  std::vector<checkpoint::Piece> pieces(bool for_save, int island, bool outer_state,
                                        const at::Tensor& in_flight, bool error_feedback) const;
  std::vector<checkpoint::Piece> save_pieces();
  // resume() within this job's ranks.
  int64_t resume_this_job(const std::function<void(const std::string&)>& log);
  // After loading: the outer optimizer's state afresh when the checkpoint has none, and the
  // exchange in flight at `step` when it has one.
  void restore_outer(int64_t step, bool outer_state, const at::Tensor& in_flight,
                     const std::function<void(const std::string&)>& log);
  std::string model_description() const;

  const Config& config_;
  const comm::DeviceMesh& mesh_;
  const parallel::FlatParameters& params_;
  parallel::ShardedDataParallel& data_parallel_;
  optim::FlatAdamW& optimizer_;
  optim::outer::OuterOptimizer* outer_;  // null without an outer optimizer
  std::string tokenizer_model_;          // data.tokenizer serialized into every manifest ("" for bytes)
  std::unique_ptr<comm::MpiCommunicator>
      comm_;  // checkpoint collectives never share the training communicator
  std::unique_ptr<checkpoint::CheckpointStore> store_;
  int saved_ = 0;
  double waited_seconds_ = 0.0;                    // training stopped for save() and fence()
  std::unique_ptr<checkpoint::AsyncSaver> saver_;  // async modes; declared last: waits first on destruction
};

}  // namespace atl::runtime
