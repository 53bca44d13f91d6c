#include "runtime/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "comm/flight_recorder.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_host_identity.h"
#include "comm/watchdog.h"
#include "optim/grad_clip.h"
#include "runtime/checkpointing.h"
#include "runtime/device.h"
#include "runtime/device_agreement.h"
#include "runtime/host/host_name.h"
#include "runtime/host_memory.h"
#include "runtime/island_steps.h"
#include "runtime/metrics/allocation_peak.h"
#include "runtime/metrics/console_lines.h"
#include "runtime/metrics/run_log.h"
#include "runtime/metrics/step_profiler.h"
#include "runtime/model/sdpa_backend.h"
#include "runtime/parallelize.h"
#include "runtime/pipeline_passes.h"
#include "runtime/preemption.h"
#include "runtime/process_exit.h"
#include "runtime/step_costs.h"
#include "runtime/test_hooks.h"
#include "runtime/training_sample.h"

namespace atl::runtime {

namespace pipe = parallel::pipeline;
using Clock = std::chrono::steady_clock;

NonFiniteStop::NonFiniteStop(const std::string& message) : std::runtime_error(message) {}

namespace {

// model.document_mask needs every shard to tell where its documents start: by its own record
// (Megatron's index) or by the tokenizer's BOS/EOS in its tokens.
void check_documents_known(const Config& config, const TrainingData& data) {
  if (!config.model.document_mask) return;
  for (const SequenceSource* source : {data.train.get(), data.val.get()})
    if (const Shard* shard = source->shard_without_documents())
      throw ConfigError({"model.document_mask: true but " + shard->path() +
                         " records no document starts and data.tokenizer (" + config.data.tokenizer +
                         ") has no BOS or EOS to find them by; use a Megatron .bin/.idx or data prepared "
                         "with a tokenizer that marks documents, or set model.document_mask: false"});
}

}  // namespace

struct Trainer::State {
  Config config;
  TestHooks hooks;
  // Declared before every communicator: their operations close flight records until they are gone.
  std::unique_ptr<comm::FlightRecorder> flight;
  std::unique_ptr<comm::MpiCommunicator> control;  // the world, for the per-step preemption vote
  PreemptionWatch preemption;
  std::unique_ptr<RunLog> log;  // rank 0's console, metrics.jsonl and TensorBoard
  TrainingData data;
  std::map<std::string, at::Tensor> initial_weights;  // model.init_from, read in the local checks
  std::unique_ptr<Tokenizer> tokenizer;               // data.tokenizer: train.sample_every decodes with it
  DeviceChoice device;                                // run.device as chosen in the local checks
  ParallelLayout layout;
  std::unique_ptr<PipelinePasses> passes;  // the model through the schedule
  std::unique_ptr<IslandSteps> islands;    // the outer steps and rounds around the inner ones
  std::unique_ptr<TrainerCheckpoints> checkpoints;
  double peak_flops = 0.0;  // per rank
  int64_t step = 0;
  int64_t last_saved_step = -1;  // the newest checkpoint this run saved, and its directory
  std::string last_saved_dir;
  int preempted_by = 0;                      // the signal that stopped run(), 0 if none
  std::unique_ptr<comm::Watchdog> watchdog;  // declared last: stops first

  const comm::DeviceMesh& mesh() const { return *layout.mesh; }

  // Start-up checks that need no collective: the config and layout, test hooks, tokenizer, data
  // files, initial weights, the device and the kernel levers it allows.
  void check_locally(int world_size, const LaunchEnvironment& environment, const RankPlacement& placement) {
    const std::vector<std::string> problems = validate_layout(config, world_size);
    if (!problems.empty()) throw ConfigError(problems);
    hooks = TestHooks::parse(environment);
    tokenizer = load_training_tokenizer(config);
    data = open_training_data(config.data.train, config.data.val, config.model.seq, config.model.vocab,
                              static_cast<uint64_t>(config.run.seed), config.train.eval_every,
                              config.train.eval_sequences,
                              DocumentMarkers{tokenizer->bos_id(), tokenizer->eos_id()});
    check_documents_known(config, data);
    if (config.model.starts_from_file())
      initial_weights = read_initial_weights(config.model, config.model.init_from);
    const ParallelConfig& p = config.parallel;
    device = choose_device(config.run.device, gpu_environment(placement, world_size), config.run.share_gpu,
                           p.islands > 1 && p.pp * p.dp * p.tp * p.cp == 1);
    resolve_kernels(config, device.device,
                    hooks.fp8_emulation);  // a lever set to true this device leaves off
  }

  // The process-wide settings: the bound device, deterministic kernels, SDPA's preferred backend,
  // the allocator's heap and intra-op threads.
  void set_up_process(const comm::MpiCommunicator& world, const RankPlacement& placement) {
    bind_device(device.device);  // before any other CUDA call: NCCL and the allocator use it
    if (device.shares_gpu) comm::give_rank_own_nccl_host(world.rank());  // before the mesh's NCCL planes
    if (config.run.deterministic) use_deterministic_kernels();
    const std::optional<at::SDPBackend> attention = preferred_sdpa_backend(config.kernels.attention);
    if (device.device.is_cuda() && attention) prefer_sdpa_backend(*attention, device.device);
    keep_freed_memory_in_heap();
    at::set_num_threads(config.run.threads > 0 ? config.run.threads
                                               : default_threads_per_rank(world, placement));
  }

  // The flight recorder, the control communicator, the watchdog and the parallel layout, with the
  // islands' fault hooks in place.
  void build(const comm::MpiCommunicator& world) {
    flight = std::make_unique<comm::FlightRecorder>(static_cast<size_t>(config.comm.flight_records));
    control = world.duplicate("world");
    control->record_in(flight.get());
    watchdog = std::make_unique<comm::Watchdog>(
        world, *flight, comm::WatchdogOptions{config.comm.timeout_s, config.run.dir + "/flight", kExitHang});
    layout = parallelize(config, device.device, world, flight.get(), initial_weights, hooks.fp8_emulation);
    initial_weights.clear();
    const FaultHooks& f = hooks.faults;
    if (layout.island_exchange && f.corrupt_chunk_exchange > 0)
      layout.island_exchange->corrupt_in_flight({f.corrupt_chunk_exchange, f.corrupt_chunk_island});
    if (layout.canonical_average && f.corrupt_chunk_exchange > 0)  // rank by rank, the exchange is its own
      layout.canonical_average->corrupt_in_flight({f.corrupt_chunk_exchange, f.corrupt_chunk_island});
    if (layout.island_exchange && f.sigkill_exchange > 0)
      layout.island_exchange->die_in_exchange(f.sigkill_exchange);
    islands = std::make_unique<IslandSteps>(layout, *log);
    passes = std::make_unique<PipelinePasses>(config, layout, data);
    watchdog->watch(mesh().device_backends());
  }

  // Rank 0's start-up lines: the device, the kernels and attention.
  void log_device() {
    if (!device.note.empty()) log->line(device.note);
    if (device.device.is_cuda())
      log->line("device: " + describe_device(device.device) + " on rank 0; each rank uses its local GPU");
    log->line(kernels_line(config, layout.kernels));
    if (device.device.is_cuda() && !log->quiet())
      log->line(attention_line(config, device.device, layout.compute_dtype));
  }

  // The checkpoints, and the step resumed from (0 for a fresh run).
  void resume(const comm::MpiCommunicator& world) {
    checkpoints = std::make_unique<TrainerCheckpoints>(config, world, mesh(), *layout.params,
                                                       *layout.data_parallel, *layout.optimizer,
                                                       layout.outer.get(), hooks, tokenizer->serialized());
    step = checkpoints->resume([this](const std::string& line) { log->line(line); });
    // sigkill@STEP kills the run that started from step 0; its relaunch, resumed from a checkpoint,
    // is the recovery the test watches and must not die again.
    if (step > 0) hooks.faults.sigkill_step = -1;
  }

  // The MFU peak (measured unless run.mfu_peak_tflops gives it), then the run's records on rank 0.
  void open_log(const comm::MpiCommunicator& world, const RankPlacement& placement) {
    const std::optional<double> measured =
        config.run.mfu_peak_tflops > 0
            ? std::nullopt
            : std::optional<double>(agreed_peak_flops(layout, device, placement, *control));
    peak_flops = measured.value_or(config.run.mfu_peak_tflops * 1e12);
    log->open(world.rank() == 0, training_flops_per_token(config.model), peak_flops, world.size());
    if (device.device.is_cuda())
      log->gpu_peaks(gpu_name(device.device), device.device, measured, config.train.precision);
    const int64_t parameters = layout.params->numel();
    log->line(model_line(parameters, static_cast<double>(parameters * at::elementSize(layout.compute_dtype)),
                         std::string(name_of(config.train.precision)), config.parallel.zero, peak_flops,
                         world.size()));
    log->summary(world.size(),
                 data.train->uses(static_cast<int64_t>(config.train.steps) * config.train.global_batch),
                 mesh().rank_table(
                     world, {placement.local_rank, placement.local_size, device.device.str(), device.gpu}));
  }

  // Tied embeddings across the first and last stage: each holds a copy, kept equal by summing their
  // gradients (Megatron's embedding group) -- under ZeRO the owned pieces of the copies' buckets,
  // which have the same geometry on both stages (ParamInfo::own_bucket).
  void sum_tied_embedding_gradients() {
    comm::Communicator* group = mesh().embedding();
    if (!group || group->size() <= 1 || !config.model.tie_embeddings) return;
    const size_t bucket = layout.params->entry("model.embed_tokens.weight").bucket;
    group->all_reduce(layout.data_parallel->owned_bucket_gradient(bucket), comm::ReduceOp::kSum)->wait();
  }
};

Trainer::Trainer(const Config& config, const comm::MpiCommunicator& world, std::ostream* out,
                 const LaunchEnvironment& environment)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.config = config;
  s.log = std::make_unique<RunLog>(s.config, world.rank() == 0 ? out : nullptr, environment.progress_bar,
                                   environment.verbose);
  // Where this rank sits on its node (counted over `world` where the launcher did not say).
  const RankPlacement placement = completed_placement(world, environment.placement);
  agree_on_startup(world, [&] { s.check_locally(world.size(), environment, placement); });
  agree_on_device_kind(world, s.device, host_name());  // before anything binds a device or makes NCCL
  s.set_up_process(world, placement);
  s.build(world);
  s.log_device();
  s.resume(world);
  s.open_log(world, placement);
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const {
  return state_->step;
}
const parallel::FlatParameters& Trainer::parameters() const {
  return *state_->layout.params;
}
const comm::DeviceMesh& Trainer::mesh() const {
  return state_->mesh();
}
const optim::outer::OuterOptimizer* Trainer::outer_optimizer() const {
  return state_->layout.outer.get();
}
int Trainer::preempted_by() const {
  return state_->preempted_by;
}
std::string Trainer::save_checkpoint() {
  return state_->checkpoints->save(state_->step);
}
parallel::ModelStateBytes Trainer::model_state_bytes() const {
  return state_->layout.model_state_bytes();
}

std::map<std::string, at::Tensor> Trainer::full_parameters() {
  ParallelLayout& l = state_->layout;
  l.data_parallel->gather_all();
  std::map<std::string, at::Tensor> out;
  for (const parallel::FlatEntry& e : l.params->entries()) out[e.info.name] = e.value.detach().clone();
  l.data_parallel->release_all();
  return out;
}

StepMetrics Trainer::train_step() {
  State& s = *state_;
  const Config& c = s.config;
  ParallelLayout& l = s.layout;
  StepCostMeter costs(l);
  s.hooks.faults.act_before_step(s.step + 1, s.mesh().rank());
  l.data_parallel->start_step(c.parallel.microbatches);
  const at::Tensor local_loss = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(l.device));
  std::optional<AllocationPeak> activations(l.device);
  const pipe::PipelineRunStats pipeline_stats = s.passes->train(
      s.step, local_loss,
      s.hooks.faults.poisons_loss(s.step + 1, s.mesh().rank(), s.mesh().shape().world_size()));
  const int64_t activation_bytes = activations->peak_bytes();
  activations.reset();
  l.data_parallel->finish();
  s.sum_tied_embedding_gradients();
  costs.before_outer_exchange();
  const double island_average_seconds = l.islands_average_every_step() ? s.islands->average_gradients() : 0.0;

  // The last stage holds the loss: sum over the pipeline, average over data parallelism.
  at::Tensor loss = at::full({1}, local_loss.item<double>(), at::TensorOptions().dtype(at::kDouble));
  if (l.pipeline.stages > 1) s.mesh().pp().all_reduce(loss, comm::ReduceOp::kSum)->wait();
  comm::WorkPtr loss_work = s.mesh().dp().all_reduce(loss, comm::ReduceOp::kAvg);
  // The norm is agreed over the model and dp groups and a NaN anywhere in a gradient (or a loss,
  // whose backward spreads it) reaches it, so every rank of the island decides alike.
  const double grad_norm = l.global_grad_norm();
  const bool finite = std::isfinite(grad_norm);
  const bool stop = !finite && c.train.on_nonfinite == NonFiniteAction::kStop;
  const double lr = l.lr_schedule.at(s.step);
  // A lazy checkpoint's snapshot must be taken before the state changes.
  const double checkpoint_wait = s.checkpoints->fence();
  if (finite) l.optimizer->step(lr, optim::clip_factor(grad_norm, c.optim.grad_clip));
  // A skipped step still takes part in the islands' sync schedule; a stop leaves the state as it was.
  const int outer_islands =
      l.outer && !stop ? s.islands->after_inner_step(s.step + 1) : 0;  // may move theta: before the copies
  l.data_parallel->after_optimizer_step();
  loss_work->wait();
  // Islands averaging every step talk every step anyway: their loss is the whole job's. With an
  // outer optimizer the loss stays island 0's (a message per step is what islands avoid).
  if (l.islands_average_every_step()) s.mesh().island().all_reduce(loss, comm::ReduceOp::kAvg)->wait();
  if (!stop) ++s.step;

  StepMetrics m;
  m.step = stop ? s.step + 1 : s.step;
  m.nonfinite = !finite;
  m.skipped = !finite && !stop;
  m.loss = loss.item<double>();
  m.lr = lr;
  m.grad_norm = grad_norm;
  m.outer_islands = outer_islands;
  m.activation_bytes = static_cast<uint64_t>(activation_bytes);
  costs.finish(m, c, s.peak_flops, pipeline_stats, checkpoint_wait, island_average_seconds);
  return m;
}

double Trainer::evaluate() {
  return state_->passes->validation_loss();
}

double Trainer::evaluate_outer() {
  return state_->islands->on_phi([this] { return evaluate(); });
}

void Trainer::run() {
  State& s = *state_;
  const std::optional<int64_t> caught_up_at = s.islands->catch_up(s.step);
  if (caught_up_at) s.step = *caught_up_at;
  s.log->start(s.step, s.mesh().shape().world_size());
  StepProfiler profiler({s.config.train.profile_start, s.config.train.profile_steps,
                         s.config.run.dir + "/profile", s.mesh().rank(), s.device.device.is_cuda()});
  // An island that took the others' state at a round's step finishes that step as they did: a
  // catch-up at the last step must still be committed and validated, not end with nothing saved.
  if (caught_up_at) end_of_step(s.step);
  if (s.step >= s.config.train.steps && !caught_up_at) {
    s.log->already_complete(s.step);
    return;
  }
  while (s.step < s.config.train.steps) {
    profiler.before_step(s.step + 1);
    const StepMetrics m = train_step();
    for (const std::string& line : profiler.after_step(m.step)) s.log->line(line);
    s.log->step(m);
    if (m.nonfinite) {
      s.log->nonfinite(m);
      if (!m.skipped)
        throw NonFiniteStop(
            nonfinite_line(m) + "; committed " + commit_now() +
            " with the state before it; lower optim.lr or raise optim.grad_clip and resume, or "
            "set train.on_nonfinite=skip to skip such steps");
    }
    s.log->progress(m);
    end_of_step(m.step);
    if (const int signal = s.preemption.agreed_signal(*s.control)) {
      // Preempted: this step is done; commit it synchronously and leave.
      s.log->preempted(m.step, signal, signal_name(signal), commit_now());
      s.preempted_by = signal;
      return;
    }
  }
  const std::string committed = s.checkpoints->finish();
  if (!committed.empty()) s.log->line("checkpoint: " + committed + " committed");
  s.log->finished(s.step, committed, s.checkpoints->costs_line());
}

void Trainer::end_of_step(int64_t step) {
  State& s = *state_;
  const Config& c = s.config;
  const auto due = [&c, step](int every) {
    return every > 0 && (step % every == 0 || step == c.train.steps);
  };
  if (due(c.checkpoint.every)) {
    const auto t0 = Clock::now();
    s.last_saved_dir = save_checkpoint();
    s.last_saved_step = step;
    s.log->checkpoint(step, s.last_saved_dir, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  if (due(c.train.eval_every) && c.train.eval_sequences > 0) {
    const double val_loss = evaluate();
    s.log->validation(step, val_loss, s.islands->validation(val_loss, [this] { return evaluate(); }));
  }
  if (due(c.train.sample_every)) {
    const auto weights =
        gather_canonical_weights(c, s.mesh(), *s.layout.params, full_parameters(), *s.control);
    if (s.mesh().rank() == 0)
      s.log->sample(step, c.train.sample_prompt, sample_text(c, weights, *s.tokenizer, step));
  }
}

std::string Trainer::commit_now() {
  State& s = *state_;
  const std::string dir = s.last_saved_step == s.step ? s.last_saved_dir : save_checkpoint();
  s.checkpoints->finish();
  return dir;
}

}  // namespace atl::runtime
