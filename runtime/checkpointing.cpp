#include "runtime/checkpointing.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "runtime/metrics/console_lines.h"
#include "runtime/model/llama.h"
#include "runtime/model/model_description.h"

namespace atl::runtime {

TrainerCheckpoints::TrainerCheckpoints(const Config& config, const comm::MpiCommunicator& world,
                                       const comm::DeviceMesh& mesh, const parallel::FlatParameters& params,
                                       parallel::ShardedDataParallel& data_parallel,
                                       optim::FlatAdamW& optimizer, optim::outer::OuterOptimizer* outer,
                                       const TestHooks& hooks, std::string tokenizer_model)
    : config_(config),
      mesh_(mesh),
      params_(params),
      data_parallel_(data_parallel),
      optimizer_(optimizer),
      outer_(outer),
      tokenizer_model_(std::move(tokenizer_model)),
      comm_(world.split(0, world.rank(), "checkpoint")),
      store_(std::make_unique<checkpoint::CheckpointStore>(
          config.checkpoint_dir(), *comm_, config.checkpoint.keep, config.checkpoint.keep_every,
          hooks.checkpoint_fault)) {
  store_->remove_partials();
  if (config.checkpoint.mode != CheckpointMode::kSync) {
    saver_ = std::make_unique<checkpoint::AsyncSaver>(
        *store_, config.checkpoint.mode == CheckpointMode::kAsyncLazy, hooks.checkpoint_copy_delay);
  }
}

double TrainerCheckpoints::fence() {
  if (!saver_) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  saver_->fence();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  waited_seconds_ += seconds;
  return seconds;
}

std::string TrainerCheckpoints::costs_line() const {
  if (saved_ == 0) return "";
  const std::string head = "checkpoints: " + std::to_string(saved_) + " saved; training waited " +
                           formatted("%.2f s", waited_seconds_) + " for them";
  if (!saver_) return head + " (checkpoint.mode sync)";
  return head + formatted(", writing them took %.2f s in the background", saver_->background_seconds());
}

std::string TrainerCheckpoints::finish() {
  return saver_ ? saver_->wait() : "";
}

std::string TrainerCheckpoints::model_description() const {
  return describe_model(config_.model);
}

std::vector<checkpoint::Piece> TrainerCheckpoints::pieces(bool for_save, int island, bool outer_state,
                                                          const at::Tensor& in_flight,
                                                          bool error_feedback) const {
  const int tp_size = config_.parallel.tp, tp_rank = mesh_.coord().tp;
  std::vector<checkpoint::Piece> out;
  // Islands averaging every step (no outer optimizer) are replicas: island 0 writes for them all.
  if (for_save && !outer_ && mesh_.coord().island != 0) return out;
  for (const parallel::ShardedDataParallel::OwnedRun& run : data_parallel_.owned_runs()) {
    const parallel::FlatEntry& e = params_.entries()[run.entry];
    // Written once: a tied copy on another stage, a tp-replicated norm off tp rank 0, and a replica
    // under plain data parallelism off rank 0 of the dp group (dp x cp ranks) hold nothing new. Every rank
    // loads all it holds.
    if (for_save && (e.info.duplicate || (e.info.replicated_in_model_group && tp_rank != 0) ||
                     (data_parallel_.stage() == 0 && mesh_.dp().rank() != 0)))
      continue;
    const LlamaModel::Piece piece = LlamaModel::piece_of(config_.model, tp_size, tp_rank, e.info.name);
    const auto add = [&](checkpoint::proto::Role role, const at::Tensor& data) {
      out.push_back({e.info.name,
                     role,
                     island,
                     piece.global_shape,
                     {piece.offsets, piece.sizes},
                     run.entry_offset,
                     run.entry_offset + run.numel,
                     data});
    };
    add(checkpoint::proto::PARAM, data_parallel_.optimizer_values_at(run.offset, run.numel));
    add(checkpoint::proto::EXP_AVG, optimizer_.exp_avg().narrow(0, run.offset, run.numel));
    add(checkpoint::proto::EXP_AVG_SQ, optimizer_.exp_avg_sq().narrow(0, run.offset, run.numel));
    if (outer_state) {
      add(checkpoint::proto::OUTER_PARAM, outer_->phi().narrow(0, run.offset, run.numel));
      add(checkpoint::proto::OUTER_MOMENTUM, outer_->momentum().narrow(0, run.offset, run.numel));
    }
    if (in_flight.defined())
      add(checkpoint::proto::OUTER_IN_FLIGHT, in_flight.narrow(0, run.offset, run.numel));
    if (error_feedback && outer_ && outer_->error_feedback().defined())
      add(checkpoint::proto::OUTER_ERROR_FEEDBACK, outer_->error_feedback().narrow(0, run.offset, run.numel));
  }
  return out;
}

std::vector<checkpoint::Piece> TrainerCheckpoints::save_pieces() {
  // An exchange in flight is waited for: its result is part of the state a resume needs.
  const at::Tensor in_flight = outer_ ? outer_->in_flight_result() : at::Tensor();
  return pieces(/*for_save=*/true, mesh_.coord().island, outer_ != nullptr, in_flight,
                /*error_feedback=*/true);
}

std::string TrainerCheckpoints::save(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = save_now(step);
  waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++saved_;
  return dir;
}

std::string TrainerCheckpoints::save_now(int64_t step) {
  checkpoint::SaveInfo info;
  info.step = step;
  info.tokens = step * config_.train.global_batch * config_.model.seq;
  info.seed = config_.run.seed;
  info.schedule_steps = config_.train.steps;
  info.model_config = model_description();
  info.tokenizer = tokenizer_model_;
  const ParallelConfig& p = config_.parallel;
  info.mesh.set_islands(p.islands);
  info.mesh.set_pp(p.pp);
  info.mesh.set_dp(p.dp);
  info.mesh.set_tp(p.tp);
  info.mesh.set_zero(p.zero);
  if (!saver_) {
    store_->die_if_fault("copy", step);  // sync mode has no copy: its save starts here
    return store_->save(info, save_pieces());
  }
  saver_->request(info, save_pieces());
  return store_->dir() + "/step-" + std::to_string(step) + ", writing in the background";
}

void TrainerCheckpoints::restore_outer(int64_t step, bool outer_state, const at::Tensor& in_flight,
                                       const std::function<void(const std::string&)>& log) {
  if (!outer_state) {
    outer_->reset_from_values();
    log("checkpoint: no outer optimizer state saved; phi starts from the loaded parameters, momentum 0");
  }
  if (!outer_->restore(step, in_flight))
    log("checkpoint: the outer exchange in flight at step " + std::to_string(step) +
        " is not in the checkpoint (saved with another outer schedule); it is dropped");
}

int64_t TrainerCheckpoints::resume(const std::function<void(const std::string&)>& log) {
  const int64_t step = resume_this_job(log);
  if (!config_.islands_are_jobs()) return step;
  // Each island job resumed from its own run.dir: they must continue the same outer round.
  const std::vector<double> steps = comm::all_gather_value(mesh_.island(), static_cast<double>(step));
  if (std::all_of(steps.begin(), steps.end(), [&](double s) { return s == steps.front(); })) return step;
  std::string listed;
  for (size_t island = 0; island < steps.size(); ++island)
    listed += (island == 0 ? "" : ", ") + std::string("island ") + std::to_string(island) + " at step " +
              std::to_string(static_cast<int64_t>(steps[island]));
  const auto earliest = static_cast<int64_t>(*std::min_element(steps.begin(), steps.end()));
  const std::string same = earliest > 0 ? "checkpoint.resume: CHECKPOINT_DIR/step-" + std::to_string(earliest)
                                        : std::string("checkpoint.resume: none");
  throw checkpoint::CheckpointError("checkpoint: the island jobs resumed from different steps (" + listed +
                                    "); resume every island from the same step, e.g. " + same + " in each");
}

int64_t TrainerCheckpoints::resume_this_job(const std::function<void(const std::string&)>& log) {
  const CheckpointConfig& c = config_.checkpoint;
  if (!c.resumes()) return 0;
  const bool automatic = c.resumes_newest();
  const std::vector<std::string> candidates =
      automatic ? store_->committed() : std::vector<std::string>{c.resume};
  std::string problem;
  for (const std::string& dir : candidates) {
    std::string error;
    checkpoint::proto::Manifest manifest;
    bool other_model = false, outer_state = false, error_feedback = false;
    at::Tensor in_flight;
    try {
      manifest = checkpoint::read_manifest(dir);
      other_model = !same_architecture(manifest.model_config(), config_.model);
      int saved_islands = 1;
      for (const checkpoint::proto::Tensor& t : manifest.tensors()) {
        saved_islands = std::max(saved_islands, t.island() + 1);
        outer_state |= t.role() == checkpoint::proto::OUTER_PARAM;
        error_feedback |= t.role() == checkpoint::proto::OUTER_ERROR_FEEDBACK;
        if (outer_ && t.role() == checkpoint::proto::OUTER_IN_FLIGHT && !in_flight.defined())
          in_flight = at::zeros_like(outer_->phi());
      }
      outer_state &= outer_ != nullptr;
      at::NoGradGuard no_grad;
      if (!other_model)
        checkpoint::load_pieces(dir, manifest,
                                pieces(/*for_save=*/false, mesh_.coord().island % saved_islands, outer_state,
                                       in_flight, error_feedback && outer_state));
    } catch (const checkpoint::CheckpointError& e) {
      error = e.what();
    }
    // Another model is refused outright, never skipped; every rank read the same manifest.
    if (other_model)
      throw checkpoint::CheckpointError(
          "checkpoint: " + dir + " holds the model {" + manifest.model_config() + "} but the config has {" +
          model_description() + "}; resume with the model it was saved for, or set checkpoint.resume: none");
    problem = checkpoint::agreed_error(*comm_, error);
    if (problem.empty()) {
      optimizer_.restore_steps_taken(manifest.step());
      if (outer_) restore_outer(manifest.step(), outer_state, in_flight, log);
      data_parallel_.after_optimizer_step();  // compute parameters from the loaded values, gathered
      log("checkpoint: resumed from " + dir + " at step " + std::to_string(manifest.step()));
      const int64_t saved_steps = manifest.schedule_steps();
      if (saved_steps > 0 && saved_steps != config_.train.steps)
        log("optim: train.steps is " + std::to_string(config_.train.steps) + " but was " +
            std::to_string(saved_steps) + " when step " + std::to_string(manifest.step()) +
            " was saved: the learning-rate schedule now ends at step " + std::to_string(config_.train.steps) +
            " and continues from step " + std::to_string(manifest.step()) +
            " on that longer or shorter curve");
      return manifest.step();
    }
    if (!automatic) throw checkpoint::CheckpointError(problem);
    log(problem + "; trying an older checkpoint");
  }
  if (!candidates.empty())
    throw checkpoint::CheckpointError("checkpoint: no usable checkpoint in " + store_->dir() +
                                      " (last problem: " + problem +
                                      "); set checkpoint.resume: none to start afresh");
  return 0;
}

}  // namespace atl::runtime
