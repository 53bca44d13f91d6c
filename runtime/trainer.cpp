#include "runtime/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "comm/flight_recorder.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_host_identity.h"
#include "comm/watchdog.h"
#include "optim/grad_clip.h"
#include "runtime/checkpointing.h"
#include "runtime/data/batches.h"
#include "runtime/device.h"
#include "runtime/host_memory.h"
#include "runtime/metrics/allocation_peak.h"
#include "runtime/metrics/console_lines.h"
#include "runtime/metrics/peak_flops.h"
#include "runtime/metrics/run_log.h"
#include "runtime/metrics/step_profiler.h"
#include "runtime/model/sdpa_backend.h"
#include "runtime/parallelize.h"
#include "runtime/preemption.h"
#include "runtime/process_exit.h"
#include "runtime/step_costs.h"
#include "runtime/test_hooks.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/training_sample.h"

namespace atl::runtime {

namespace pipe = parallel::pipeline;
using Clock = std::chrono::steady_clock;

NonFiniteStop::NonFiniteStop(const std::string& message) : std::runtime_error(message) {}

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
  std::unique_ptr<TrainerCheckpoints> checkpoints;
  double peak_flops = 0.0;  // per rank
  int64_t step = 0;
  int preempted_by = 0;                      // the signal that stopped run(), 0 if none
  std::unique_ptr<comm::Watchdog> watchdog;  // declared last: stops first

  const comm::DeviceMesh& mesh() const { return *layout.mesh; }

  // A matmul of the compute dtype, timed. Every rank measures at once, as they will compute at once;
  // the dp average is the peak per rank. Ranks sharing a GPU (more on the node than GPUs) would each
  // measure a fraction of it: one rank per GPU measures alone, and every rank takes the largest peak.
  double measured_peak_flops(const RankPlacement& placement) {
    const int gpus = device.device.is_cuda() ? visible_cuda_devices() : 0;
    const bool gpu_shared = gpus > 0 && placement.local_size > gpus;
    const bool measures = !gpu_shared || placement.local_rank < gpus;
    at::Tensor peak =
        at::full({1}, measures ? measure_matmul_peak_flops(layout.compute_dtype, device.device) : 0.0,
                 at::TensorOptions().dtype(at::kDouble));
    if (gpu_shared)
      control->all_reduce(peak, comm::ReduceOp::kMax)->wait();
    else
      mesh().dp().all_reduce(peak, comm::ReduceOp::kAvg)->wait();
    return peak.item<double>();
  }

  // After inner step `step`: the outer optimizer's syncs. Islands with a membership per round meet
  // at each round's boundary first. Returns the round's member count (0: no round ended here).
  int outer_step(int64_t step) {
    if (!layout.rounds || step % layout.rounds->inner_steps() != 0) {
      outer_syncs(step);
      return 0;
    }
    return outer_round(step / layout.rounds->inner_steps());
  }

  // The outer optimizer's syncs due after `step`, and the islands they left out for their norm.
  void outer_syncs(int64_t step) {
    layout.outer->after_inner_step(step);
    for (const optim::outer::IslandExchange::LeftOut& out : layout.outer->take_left_out())
      log->pseudo_gradient_left_out(step, out.island, out.norm);
  }

  // Round `round` among the islands that come, met again among those still there while its exchange
  // fails (a member died mid-round). Returns its member count (0: this island came too late and sits
  // it out, to catch up at the next one).
  int outer_round(int64_t round) {
    constexpr int kAttempts = 10;
    ParallelLayout& l = layout;
    const int64_t boundary = round * l.rounds->inner_steps();
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      try {
        const MetRound met = l.rounds->meet(round, attempt, *l.mesh, *l.outer, *l.island_exchange);
        for (int island : met.joined) log->island_event(boundary, "island_joined", island);
        for (int island : met.dropped) log->island_event(boundary, "island_dropped", island);
        if (!met.member) {
          log->island_event(boundary, "sat_out", mesh().coord().island);
          return 0;
        }
        if (met.caught_up) log->island_event(boundary, "caught_up", mesh().coord().island);
        outer_syncs(boundary);
        l.rounds->completed(round);
        return static_cast<int>(met.islands.size());
      } catch (const optim::outer::RoundFailed& e) {
        log->line("outer round " + std::to_string(round) + ": " + e.what() + "; meeting again (attempt " +
                  std::to_string(attempt + 2) + ")");
      }
    }
    throw std::runtime_error("outer round " + std::to_string(round) + " failed " + std::to_string(kAttempts) +
                             " times in a row; check the islands' links and logs, then resume");
  }

  // Islands with a membership per round, after resuming: when the others are past this island's
  // phi, it meets their next round before training, takes their state and continues at that round's
  // step. A round that closed just before it arrived is followed by the next. Returns whether it did.
  bool catch_up_with_the_islands() {
    if (!layout.rounds) return false;
    const std::optional<int64_t> first = layout.rounds->round_to_catch_up(step);
    if (!first) return false;
    log->line("islands: the others are past this island's step " + std::to_string(step) + "; meeting round " +
              std::to_string(*first) + " to take their state");
    constexpr int kRounds = 3;
    for (int64_t round = *first; round < *first + kRounds; ++round) {
      if (outer_round(round) == 0) continue;
      step = round * layout.rounds->inner_steps();
      layout.data_parallel->after_optimizer_step();  // compute copies and ZeRO gathers of the new theta
      return true;
    }
    throw std::runtime_error("islands: rounds " + std::to_string(*first) + " to " +
                             std::to_string(*first + kRounds - 1) +
                             " closed before this island arrived; check its link to outer.rendezvous");
  }

  // The rank whose backward the nan_gradient hook poisons: the last rank is on a last stage.
  bool poisons_loss(int64_t step_number) const {
    const FaultHooks& f = hooks.faults;
    const int hooked = f.nan_gradient_rank >= 0 ? f.nan_gradient_rank : mesh().shape().world_size() - 1;
    return f.nan_gradient(step_number, hooked) && mesh().rank() == hooked;
  }

  // Runs model chunk `chunk` on `batch`'s inputs (first virtual stage) or on `input`; returns the
  // activation for the next virtual stage, or on the last one the mean loss over `batch`'s targets.
  at::Tensor forward_chunk(int chunk, const at::Tensor& input, const TokenBatch& batch) const {
    const bool first = layout.pipeline.is_first(chunk), last = layout.pipeline.is_last(chunk);
    const LlamaModel& model = *layout.chunks[chunk];
    const at::Tensor out = model.forward(first ? batch.inputs : input);
    return last ? model.loss_of(out, batch.targets) : out;
  }

  // The tokens of `count` microbatches (`load(micro)`), on the device before the pipeline starts,
  // on a rank that runs an end of the model (empty batches elsewhere). Not inside the schedule:
  // pinning host memory there can synchronise the device (a new cudaHostAlloc), which waits for a
  // receive whose sender may be waiting for this rank -- a pipeline deadlock on the GPU.
  std::vector<TokenBatch> stage_batches(int count, const std::function<TokenBatch(int)>& load) const {
    std::vector<TokenBatch> batches(static_cast<size_t>(count));
    // Only a rank's first chunk can be the model's first, only its last chunk the model's last.
    const int last_chunk = static_cast<int>(layout.chunks.size()) - 1;
    if (!layout.pipeline.is_first(0) && !layout.pipeline.is_last(last_chunk)) return batches;
    for (int micro = 0; micro < count; ++micro) batches[static_cast<size_t>(micro)] = on_device(load(micro));
    return batches;
  }

  // Tokens reach a GPU through pinned host memory (the caching host allocator reuses it), copied
  // without blocking the host; on the CPU they stay where the mmap'ed shard put them.
  TokenBatch on_device(TokenBatch batch) const {
    if (!layout.device.is_cuda()) return batch;
    return {batch.inputs.pin_memory().to(layout.device, /*non_blocking=*/true),
            batch.targets.pin_memory().to(layout.device, /*non_blocking=*/true)};
  }

  // Every island takes its own share of each step's sequences: rank d of island i reads share
  // i*dp + d of islands*dp.
  int data_rank() const { return mesh().coord().island * config.parallel.dp + mesh().coord().dp; }
  int data_ranks() const { return config.parallel.islands * config.parallel.dp; }

  // The dp-averaged gradients of what this rank owns, averaged with the same pieces in every other
  // island; returns the seconds it blocked.
  double average_gradients_over_islands() {
    const auto start = Clock::now();
    const at::Tensor& grads = layout.data_parallel->optimizer_grads();
    grads.copy_(layout.island_exchange->mean(grads));
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
};

namespace {

// The SDPA kernel kernels.attention puts first; none for auto (LibTorch's own order).
std::optional<at::SDPBackend> preferred_sdpa_backend(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFlash:
      return at::SDPBackend::flash_attention;
    case AttentionKernel::kCudnn:
      return at::SDPBackend::cudnn_attention;
    case AttentionKernel::kEfficient:
      return at::SDPBackend::efficient_attention;
    case AttentionKernel::kAuto:
      break;
  }
  return std::nullopt;
}

// The start-up line naming the attention kernel a GPU run's layers get from SDPA (this rank's heads).
std::string attention_line(const Config& config, const c10::Device& device, at::ScalarType dtype) {
  const ModelConfig& m = config.model;
  const int64_t heads = m.heads / config.parallel.tp, head_dim = m.dim / m.heads;
  const bool grouped = m.kv_heads != m.heads && kernel_on(config.kernels.native_gqa, true);
  const int64_t kv_heads = grouped ? m.kv_heads / config.parallel.tp : heads;
  const at::SDPBackend backend = sdpa_choice(device, dtype, heads, kv_heads, m.seq, head_dim);
  return "attention: SDPA runs " + sdpa_backend_name(backend) +
         " (kernels.attention=" + std::string(name_of(config.kernels.attention)) + "; " +
         std::to_string(heads) + " heads over " + std::to_string(kv_heads) + " kv heads per rank, head_dim " +
         std::to_string(head_dim) + ", seq " + std::to_string(m.seq) + ", " +
         std::string(c10::toString(dtype)) + ")";
}

// A GPU's peaks beside the one MFU is measured against: the datasheet's dense bf16 peak, which also
// goes into the start record, and bf16 and TF32 matmuls measured on this rank's GPU -- only printed,
// so a rank without a console (every rank but 0, and the tests' trainers) does not measure them.
// `measured_peak`: the MFU peak when the start-up probe measured it (none when run.mfu_peak_tflops gave it).
void log_gpu_peaks(RunLog& log, const c10::Device& device, std::optional<double> measured_peak,
                   Precision precision) {
  const std::string name = gpu_name(device);
  const std::optional<double> datasheet = datasheet_bf16_peak_flops(name);
  if (datasheet) log.datasheet_peak(*datasheet);
  if (log.quiet()) return;
  const double bf16 = precision == Precision::kBf16 && measured_peak
                          ? *measured_peak
                          : measure_matmul_peak_flops(at::kBFloat16, device);
  const double tf32 = measure_tf32_matmul_peak_flops(device);
  log.line(formatted(
      "peak: %s measured %.0f TFLOP/s bf16, %.0f TFLOP/s tf32 (MFU against %s); datasheet dense bf16 %s",
      name.c_str(), bf16 / 1e12, tf32 / 1e12, std::string(name_of(precision)).c_str(),
      datasheet ? formatted("%.0f TFLOP/s", *datasheet / 1e12).c_str() : "unknown for this GPU"));
}

// data.tokenizer, checked: a subword model has model.vocab pieces (the shards' ids are its), and
// train.sample_prompt fits in model.seq.
std::unique_ptr<Tokenizer> checked_tokenizer(const Config& config) {
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(config.data.tokenizer);
  if (config.data.tokenizer != kByteTokenizer && tokenizer->vocab_size() != config.model.vocab)
    throw ConfigError({"data.tokenizer: " + config.data.tokenizer + " has " +
                       std::to_string(tokenizer->vocab_size()) + " pieces but model.vocab is " +
                       std::to_string(config.model.vocab) +
                       "; set model.vocab: " + std::to_string(tokenizer->vocab_size())});
  const size_t prompt = tokenizer->encode(config.train.sample_prompt).size();
  if (config.train.sample_every > 0 && (prompt == 0 || prompt > static_cast<size_t>(config.model.seq)))
    throw ConfigError({"train.sample_prompt: '" + config.train.sample_prompt + "' is " +
                       std::to_string(prompt) +
                       " tokens; give it 1 to model.seq = " + std::to_string(config.model.seq)});
  return tokenizer;
}

}  // namespace

Trainer::Trainer(const Config& config, const comm::MpiCommunicator& world, std::ostream* out,
                 const LaunchEnvironment& environment)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.config = config;
  const bool is_logger = world.rank() == 0;
  s.log = std::make_unique<RunLog>(s.config, is_logger ? out : nullptr, environment.progress_bar);
  // Where this rank sits on its node (counted over `world` where the launcher did not say).
  const RankPlacement placement = completed_placement(world, environment.placement);
  // Local checks first (no collectives): config, layout, test hooks, data files, initial weights.
  agree_on_startup(world, [&] {
    const std::vector<std::string> problems = validate_layout(config, world.size());
    if (!problems.empty()) throw ConfigError(problems);
    s.hooks = TestHooks::parse(environment);
    s.tokenizer = checked_tokenizer(config);
    s.data = open_training_data(config.data.train, config.data.val, config.model.seq, config.model.vocab,
                                static_cast<uint64_t>(config.run.seed), config.train.eval_every,
                                config.train.eval_sequences);
    if (config.model.starts_from_file())
      s.initial_weights = read_initial_weights(config.model, config.model.init_from);
    const ParallelConfig& p = config.parallel;
    s.device =
        choose_device(config.run.device, cuda_path_built(), visible_cuda_devices(), placement.local_rank,
                      placement.local_size, config.run.share_gpu, p.islands > 1 && p.pp * p.dp * p.tp == 1);
    resolve_kernels(config, s.device.device);  // a lever set to true that this device leaves off
  });
  bind_device(s.device.device);  // before any other CUDA call: NCCL and the allocator use it
  if (s.device.shares_gpu) comm::give_rank_own_nccl_host(world.rank());  // before the mesh's NCCL planes
  if (config.run.deterministic) use_deterministic_kernels();
  const std::optional<at::SDPBackend> attention = preferred_sdpa_backend(config.kernels.attention);
  if (s.device.device.is_cuda() && attention) prefer_sdpa_backend(*attention, s.device.device);

  keep_freed_memory_in_heap();
  at::set_num_threads(config.run.threads > 0 ? config.run.threads
                                             : default_threads_per_rank(world, placement));
  s.flight = std::make_unique<comm::FlightRecorder>(static_cast<size_t>(config.comm.flight_records));
  s.control = world.duplicate("world");
  s.control->record_in(s.flight.get());
  s.watchdog = std::make_unique<comm::Watchdog>(
      world, *s.flight, comm::WatchdogOptions{config.comm.timeout_s, config.run.dir + "/flight", kExitHang});
  s.layout = parallelize(config, s.device.device, world, s.flight.get(), s.initial_weights);
  s.initial_weights.clear();
  if (s.layout.island_exchange && s.hooks.faults.corrupt_chunk_exchange > 0)
    s.layout.island_exchange->corrupt_in_flight(
        {s.hooks.faults.corrupt_chunk_exchange, s.hooks.faults.corrupt_chunk_island});
  if (s.layout.island_exchange && s.hooks.faults.sigkill_exchange > 0)
    s.layout.island_exchange->die_in_exchange(s.hooks.faults.sigkill_exchange);
  s.watchdog->watch(s.mesh().device_backends());
  const std::string rank_table =
      s.mesh().rank_table(world, {placement.local_rank, placement.local_size, s.device.device.str()});
  s.log->line(config_table(config));
  s.log->line(rank_table);
  if (!s.device.note.empty()) s.log->line(s.device.note);
  if (s.device.device.is_cuda())
    s.log->line("device: " + describe_device(s.device.device) + " on rank 0; each rank uses its local GPU");
  s.log->line(kernels_line(config, s.layout.kernels));
  if (s.device.device.is_cuda() && !s.log->quiet())
    s.log->line(attention_line(config, s.device.device, s.layout.compute_dtype));

  s.checkpoints = std::make_unique<TrainerCheckpoints>(
      s.config, world, s.mesh(), *s.layout.params, *s.layout.data_parallel, *s.layout.optimizer,
      s.layout.outer.get(), s.hooks, s.tokenizer->serialized());
  s.step = s.checkpoints->resume([&s](const std::string& line) { s.log->line(line); });
  // sigkill@STEP kills the run that started from step 0; its relaunch, resumed from a checkpoint, is
  // the recovery the test watches and must not die again.
  if (s.step > 0) s.hooks.faults.sigkill_step = -1;

  const std::optional<double> measured_peak =
      config.run.mfu_peak_tflops > 0 ? std::nullopt : std::optional<double>(s.measured_peak_flops(placement));
  s.peak_flops = measured_peak.value_or(config.run.mfu_peak_tflops * 1e12);

  s.log->open(is_logger, training_flops_per_token(config.model), s.peak_flops, world.size());
  if (s.device.device.is_cuda())
    log_gpu_peaks(*s.log, s.device.device, measured_peak, config.train.precision);
  const int64_t parameters = s.layout.params->numel();
  s.log->line(model_line(
      parameters, static_cast<double>(parameters * at::elementSize(s.layout.compute_dtype)),
      std::string(name_of(config.train.precision)), config.parallel.zero, s.peak_flops, world.size()));
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
  const int microbatches = c.parallel.microbatches;
  const int64_t microbatch_size = c.train.global_batch / (s.data_ranks() * microbatches);
  if (s.hooks.faults.skip_collective(s.step + 1, s.mesh().rank())) {
    std::cerr << "atoll: fault hook: rank " << s.mesh().rank() << " skips the collectives of step "
              << s.step + 1 << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until the watchdog ends the job
  }
  if (s.step + 1 == s.hooks.faults.sigkill_step) {
    std::cerr << "atoll: fault hook: rank " << s.mesh().rank() << " dies (SIGKILL) at step " << s.step + 1
              << std::endl;
    std::raise(SIGKILL);
  }

  l.data_parallel->start_step(microbatches);
  // On the last stage: the sum of the microbatch losses / microbatches, kept where the loss is computed
  // and read once after the pipeline (a GPU is not synchronised per microbatch).
  const at::Tensor local_loss = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(l.device));
  const std::vector<TokenBatch> batches = s.stage_batches(microbatches, [&](int micro) {
    const BatchSlice slice =
        batch_slice(s.step, c.train.global_batch, s.data_rank(), s.data_ranks(), micro, microbatches);
    return s.data.train->shuffled(slice.first, slice.count);
  });
  pipe::StageCallbacks callbacks;
  callbacks.forward = [&](int chunk, int micro, const at::Tensor& input) {
    const at::Tensor out = s.forward_chunk(chunk, input, batches[static_cast<size_t>(micro)]);
    if (!l.pipeline.is_last(chunk)) return out;
    // Each microbatch's mean is scaled by 1/microbatches, so the accumulated gradient is the
    // gradient of the mean over this rank's share of the batch; the dp average does the rest.
    const at::Tensor loss = s.poisons_loss(s.step + 1) ? out * std::nan("") : out / microbatches;
    local_loss.add_(loss.detach().to(at::kDouble).reshape({}));
    return loss;
  };
  callbacks.activation_shape = [&](int) { return l.chunks.front()->hidden_shape(microbatch_size); };
  std::optional<AllocationPeak> activations(l.device);
  const pipe::PipelineRunStats pipeline_stats = l.executor->run(l.pipeline, l.schedule, callbacks);
  const int64_t activation_bytes = activations->peak_bytes();
  activations.reset();
  l.data_parallel->finish();
  // Tied embeddings across the first and last stage: each holds a copy, kept equal by summing their
  // gradients (Megatron's embedding group) -- under ZeRO the owned pieces of the copies' buckets,
  // which have the same geometry on both stages (ParamInfo::own_bucket).
  comm::Communicator* embedding_group = s.mesh().embedding();
  if (embedding_group && embedding_group->size() > 1 && c.model.tie_embeddings) {
    const size_t bucket = l.params->entry("model.embed_tokens.weight").bucket;
    embedding_group->all_reduce(l.data_parallel->owned_bucket_gradient(bucket), comm::ReduceOp::kSum)->wait();
  }
  costs.before_outer_exchange();
  const double island_average_seconds =
      l.islands_average_every_step() ? s.average_gradients_over_islands() : 0.0;

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
  if (finite) {
    l.optimizer->step(lr, optim::clip_factor(grad_norm, c.optim.grad_clip));
  }
  // A skipped step still takes part in the islands' sync schedule; a stop leaves the state as it was.
  const int outer_islands =
      l.outer && !stop ? s.outer_step(s.step + 1) : 0;  // may move theta: before the copies
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
  State& s = *state_;
  const Config& c = s.config;
  const ParallelLayout& l = s.layout;
  at::NoGradGuard no_grad;
  // This dp rank's share of the fixed validation sequences, in chunks of one microbatch.
  const comm::ShardRange mine = comm::shard_range(c.train.eval_sequences, c.parallel.dp, s.mesh().coord().dp);
  const int64_t chunk = std::max(1, c.train.global_batch / (c.parallel.dp * c.parallel.microbatches));
  const auto count_of = [&](int micro) { return std::min(chunk, mine.numel - micro * chunk); };
  pipe::PipelineShape shape = l.pipeline;
  shape.microbatches = static_cast<int>((mine.numel + chunk - 1) / chunk);
  // On the last stage, summed where the losses are (no host synchronisation inside the schedule).
  const at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(l.device));
  if (shape.microbatches > 0) {
    const std::vector<TokenBatch> batches = s.stage_batches(shape.microbatches, [&](int micro) {
      return s.data.val->in_order(mine.offset + micro * chunk, count_of(micro));
    });
    pipe::StageCallbacks callbacks;
    callbacks.forward = [&](int model_chunk, int micro, const at::Tensor& input) {
      const at::Tensor out = s.forward_chunk(model_chunk, input, batches[static_cast<size_t>(micro)]);
      if (l.pipeline.is_last(model_chunk))
        loss_sum.add_(out.to(at::kDouble).reshape({}) * static_cast<double>(count_of(micro)));
      return out;
    };
    callbacks.activation_shape = [&](int micro) { return l.chunks.front()->hidden_shape(count_of(micro)); };
    l.executor->run(shape, pipe::forward_only_schedule(shape), callbacks);
  }
  at::Tensor total = at::full({1}, loss_sum.item<double>(), at::TensorOptions().dtype(at::kDouble));
  if (l.pipeline.stages > 1) s.mesh().pp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  s.mesh().dp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  return total.item<double>() / std::max(1, c.train.eval_sequences);
}

double Trainer::evaluate_outer() {
  ParallelLayout& l = state_->layout;
  if (!l.outer) throw std::logic_error("evaluate_outer: outer.algorithm is none");
  const at::Tensor theta = l.outer->values_copy();
  l.outer->write_values(l.outer->phi());
  l.data_parallel->after_optimizer_step();  // compute copies and ZeRO gathers of phi
  const double loss = evaluate();
  l.outer->write_values(theta);
  l.data_parallel->after_optimizer_step();
  return loss;
}

void Trainer::run() {
  State& s = *state_;
  const Config& c = s.config;
  int64_t last_saved = -1;  // the step and directory of the newest checkpoint this run saved
  std::string last_dir;
  // A committed checkpoint of the current step, saved now unless the periodic save just did.
  const auto commit_now = [&] {
    const std::string dir = last_saved == s.step ? last_dir : save_checkpoint();
    s.checkpoints->finish();
    return dir;
  };
  const auto due = [&c](int64_t step, int every) {
    return every > 0 && (step % every == 0 || step == c.train.steps);
  };
  // The end of step `step`: the checkpoint, validation and sample due at it.
  const auto step_done = [&](int64_t step) {
    if (due(step, c.checkpoint.every)) {
      const auto t0 = Clock::now();
      last_dir = save_checkpoint();
      last_saved = step;
      s.log->checkpoint(step, last_dir, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (due(step, c.train.eval_every) && c.train.eval_sequences > 0) {
      const double val_loss = evaluate();
      // This island's theta (val_loss), every island's and phi; with a membership per round, whose
      // last group may have lost a member since, this island's alone.
      std::optional<IslandValidation> islands;
      if (s.layout.outer)
        islands = IslandValidation{
            s.mesh().coord().island,
            s.layout.rounds ? std::vector<double>{} : comm::all_gather_value(s.mesh().island(), val_loss),
            evaluate_outer()};
      s.log->validation(step, val_loss, islands);
    }
    if (due(step, c.train.sample_every)) {
      const auto weights =
          gather_canonical_weights(c, s.mesh(), *s.layout.params, full_parameters(), *s.control);
      if (s.mesh().rank() == 0)
        s.log->sample(step, c.train.sample_prompt, sample_text(c, weights, *s.tokenizer, step));
    }
  };
  const bool caught_up = s.catch_up_with_the_islands();
  s.log->start(s.step, s.mesh().shape().world_size());
  StepProfiler profiler({c.train.profile_start, c.train.profile_steps, c.run.dir + "/profile",
                         s.mesh().rank(), s.device.device.is_cuda()});
  // An island that took the others' state at a round's step finishes that step as they did: a
  // catch-up at the last step must still be committed and validated, not end with nothing saved.
  if (caught_up) step_done(s.step);
  while (s.step < c.train.steps) {
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
    step_done(m.step);
    if (const int signal = s.preemption.agreed_signal(*s.control)) {
      // Preempted: this step is done; commit it synchronously and leave.
      s.log->preempted(m.step, signal, signal_name(signal), commit_now());
      s.preempted_by = signal;
      return;
    }
  }
  const std::string committed = s.checkpoints->finish();
  if (!committed.empty()) s.log->line("checkpoint: " + committed + " committed");
}

}  // namespace atl::runtime
