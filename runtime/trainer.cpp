#include "runtime/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <ostream>
#include <stdexcept>
#include <thread>

#include "comm/device_mesh.h"
#include "comm/flight_recorder.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "comm/watchdog.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"
#include "optim/outer/outer_optimizer.h"
#include "parallel/flat_parameters.h"
#include "parallel/pipeline/executor.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_layout.h"
#include "parallel/sharded_data_parallel.h"
#include "runtime/batches.h"
#include "runtime/checkpointing.h"
#include "runtime/exit_codes.h"
#include "runtime/fault_hooks.h"
#include "runtime/host_memory.h"
#include "runtime/job_launch.h"
#include "runtime/llama.h"
#include "runtime/peak_flops.h"
#include "runtime/placement.h"
#include "runtime/preemption.h"
#include "runtime/progress_display.h"
#include "runtime/tensorboard.h"

namespace atl::runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<parallel::ParamInfo> backward_order(std::vector<parallel::ParamInfo> infos) {
  std::reverse(infos.begin(), infos.end());
  return infos;
}

std::vector<optim::DecaySegment> decay_segments(const parallel::ShardedDataParallel& engine) {
  std::vector<optim::DecaySegment> segments;
  for (const parallel::ShardSpan& span :
       engine.owned_spans([](const parallel::FlatEntry& e) { return e.info.weight_decay; }))
    segments.push_back({span.offset, span.numel});
  return segments;
}

// Totals over the groups inside an island: bytes sent and seconds blocked waiting.
struct CommTotals {
  uint64_t bytes = 0;
  uint64_t tp = 0, dp = 0, pp = 0;  // the main groups' shares of `bytes`
  double wait_seconds = 0.0;
};

CommTotals comm_totals(const comm::DeviceMesh& mesh) {
  CommTotals totals;
  auto add = [&totals](const comm::Communicator& group) {
    const uint64_t bytes = group.bytes().total_bytes();
    totals.bytes += bytes;
    totals.wait_seconds += group.bytes().wait_seconds();
    return bytes;
  };
  // The island group carries only the outer exchange, accounted for by IslandExchange.
  totals.tp = add(mesh.tp());
  totals.dp = add(mesh.dp());
  totals.pp = add(mesh.pp());
  add(mesh.model());
  if (mesh.embedding()) add(*mesh.embedding());
  return totals;
}

// "fp32" | "bf16" (validated by the config) as a LibTorch dtype.
at::ScalarType dtype_named(const std::string& name) {
  return name == "bf16" ? at::kBFloat16 : at::kFloat;
}

void throw_if_invalid(const Config& config, int world_size) {
  const std::vector<std::string> problems = validate_layout(config, world_size);
  if (!problems.empty()) throw ConfigError(problems);
}

}  // namespace

PeerFailure::PeerFailure(int failed_rank)
    : std::runtime_error("rank " + std::to_string(failed_rank) + " failed its start-up checks"),
      failed_rank_(failed_rank) {}

int default_threads_per_rank(const comm::MpiCommunicator& world) {
  // The launcher's word first (Open MPI, Slurm, PMIx); else count the ranks sharing this node.
  int local_ranks = placement_from_environment([](const char* name) { return std::getenv(name); }).local_size;
  if (local_ranks < 1) {
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &local_ranks);
    MPI_Comm_free(&node);
  }
  return threads_per_rank(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), local_ranks);
}

namespace pipe = parallel::pipeline;

// The model chunks this rank runs, in chunk order: chunk c is virtual stage c * pp + stage.
std::vector<ModelPart> model_parts(const Config& config, const pipe::PipelineShape& shape) {
  const std::vector<pipe::LayerRange> ranges = pipe::virtual_stage_layers(
      config.model.layers, shape.stages, shape.virtual_stages, config.parallel.stage_layers);
  std::vector<ModelPart> parts;
  for (int chunk = 0; chunk < shape.virtual_stages; ++chunk) {
    const pipe::LayerRange& r = ranges[shape.virtual_stage(chunk)];
    parts.push_back({r.first, r.end, shape.is_first(chunk), shape.is_last(chunk)});
  }
  return parts;
}

struct Trainer::State {
  Config config;
  std::ostream* out = nullptr;
  // Declared before every communicator: their operations close flight records until they are gone.
  std::unique_ptr<comm::FlightRecorder> flight;
  std::unique_ptr<comm::MpiCommunicator> control;  // the world, for the per-step preemption vote
  PreemptionWatch preemption;
  FaultHooks faults;
  int64_t skipped_steps = 0;
  int preempted_by = 0;                            // the signal that stopped run(), 0 if none
  std::unique_ptr<TensorBoardWriter> tensorboard;  // rank 0
  std::unique_ptr<ProgressDisplay> display;        // rank 0's console (null: quiet)
  std::unique_ptr<comm::DeviceMesh> mesh;
  std::unique_ptr<parallel::FlatParameters> params;
  std::vector<std::unique_ptr<LlamaModel>> chunks;  // this rank's model chunks (one without virtual stages)
  pipe::PipelineShape pipeline;
  std::vector<pipe::PipeOp> step_schedule;
  std::unique_ptr<pipe::PipelineExecutor> executor;
  std::unique_ptr<parallel::ShardedDataParallel> data_parallel;
  std::unique_ptr<optim::FlatAdamW> optimizer;
  std::unique_ptr<optim::outer::IslandExchange> island_exchange;  // islands > 1
  std::unique_ptr<optim::outer::OuterOptimizer> outer;            // outer.algorithm != none
  std::unique_ptr<TrainerCheckpoints> checkpoints;
  std::map<std::string, at::Tensor> initial_weights;  // model.init_from, read in the local checks
  optim::LrSchedule schedule;
  std::unique_ptr<SequenceSource> train_data, val_data;
  std::unique_ptr<MetricsLog> metrics;
  double peak_flops = 0.0;  // per rank
  int64_t step = 0;
  bool is_logger = false;
  std::unique_ptr<comm::Watchdog> watchdog;  // declared last: stops first

  // The rank whose backward the nan_gradient hook poisons: the last rank is on a last stage.
  bool poisons_loss(int64_t step_number) const {
    const int hooked =
        faults.nan_gradient_rank >= 0 ? faults.nan_gradient_rank : mesh->shape().world_size() - 1;
    return faults.nan_gradient(step_number, hooked) && mesh->rank() == hooked;
  }

  // Runs model chunk `chunk` on the tokens of `load()` (first virtual stage) or on `input`;
  // returns the activation for the next virtual stage, or on the last one the mean loss over the
  // targets of `load()`. Only the ends of the model load the batch.
  at::Tensor forward_chunk(int chunk, const at::Tensor& input,
                           const std::function<TokenBatch()>& load) const {
    const bool first = pipeline.is_first(chunk), last = pipeline.is_last(chunk);
    const TokenBatch batch = first || last ? load() : TokenBatch{};
    const LlamaModel& model = *chunks[chunk];
    const at::Tensor out = model.forward(first ? batch.inputs : input);
    return last ? model.loss_of(out, batch.targets) : out;
  }

  // The global gradient norm over what this rank owns (DESIGN §5): each parameter once in the model
  // group (tp-replicated ones on tp rank 0, stage copies never), and under ZeRO over the dp group.
  double global_grad_norm() const {
    const bool count_replicated = mesh->coord().tp == 0;
    std::vector<at::Tensor> pieces;
    for (const parallel::ShardSpan& span : data_parallel->owned_spans([&](const parallel::FlatEntry& e) {
           return !e.info.duplicate && (count_replicated || !e.info.replicated_in_model_group);
         }))
      pieces.push_back(data_parallel->optimizer_grads().narrow(0, span.offset, span.numel));
    std::vector<comm::Communicator*> groups{&mesh->model()};
    if (data_parallel->gradients_sharded()) groups.insert(groups.begin(), &mesh->dp());
    return optim::global_grad_norm(pieces, groups);
  }

  parallel::ModelStateBytes model_state_bytes() const {
    parallel::ModelStateBytes bytes = data_parallel->state_bytes();
    bytes.optimizer += optimizer->state_bytes();  // the engine counted master weights
    return bytes;
  }

  // Every island takes its own share of each step's sequences: rank d of island i reads share
  // i*dp + d of islands*dp.
  int data_rank() const { return mesh->coord().island * config.parallel.dp + mesh->coord().dp; }
  int data_ranks() const { return config.parallel.islands * config.parallel.dp; }

  // Islands averaging every step (outer.algorithm none, islands > 1), synchronous data parallelism
  // across islands.
  bool islands_average_every_step() const { return island_exchange && !outer; }

  // The dp-averaged gradients of what this rank owns, averaged with the same pieces in every other
  // island; returns the seconds it blocked.
  double average_gradients_over_islands() {
    const auto start = Clock::now();
    const at::Tensor& grads = data_parallel->optimizer_grads();
    grads.copy_(island_exchange->mean(grads));
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  // The outer optimizer's fragments in the inner optimizer's coordinates: the whole of every value
  // segment, or for Streaming DiLoCo the owned runs of each fragment's layers (layer l in fragment
  // l mod P; the embedding goes with layer 0, the final norm and head with the last layer).
  std::vector<std::vector<optim::outer::ValueSpan>> outer_fragments() const {
    const int fragments = config.outer.algorithm == "streaming_diloco" ? config.outer.fragments : 1;
    std::vector<std::vector<optim::outer::ValueSpan>> out(static_cast<size_t>(fragments));
    if (fragments == 1) {
      int64_t offset = 0;
      for (const at::Tensor& segment : data_parallel->optimizer_values()) {
        out[0].push_back({offset, segment.numel()});
        offset += segment.numel();
      }
      return out;
    }
    for (const parallel::ShardedDataParallel::OwnedRun& run : data_parallel->owned_runs()) {
      const int layer = layer_of(params->entries()[run.entry].info.name, config.model.layers);
      out[static_cast<size_t>(layer % fragments)].push_back({run.offset, run.numel});
    }
    return out;
  }

  void make_outer_optimizer() {
    if (config.parallel.islands == 1 && config.outer.algorithm == "none") return;
    const OuterConfig& o = config.outer;
    island_exchange = std::make_unique<optim::outer::IslandExchange>(
        mesh->island(), optim::outer::codec_named(o.compression),
        optim::outer::SimulatedLink{o.simulated_bandwidth_mbps, o.simulated_latency_ms});
    if (o.algorithm == "none") return;
    optim::outer::OuterOptions options;
    options.algorithm = optim::outer::algorithm_named(o.algorithm);
    options.inner_steps = o.inner_steps;
    options.fragments = o.fragments;
    options.delay = o.delay;
    options.delayed = o.delayed;
    options.mix = o.mix;
    options.sgd = {o.lr, o.momentum, o.nesterov};
    options.noloco = {o.lr, o.momentum, o.gamma};
    options.group_size = o.group_size;
    options.seed = static_cast<uint64_t>(config.run.seed);
    outer = std::make_unique<optim::outer::OuterOptimizer>(options, data_parallel->optimizer_values(),
                                                           outer_fragments(), *island_exchange);
  }

  // One number from every island, in island order (a few bytes over the island group).
  std::vector<double> gather_over_islands(double value) const {
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor all = at::empty({mesh->island().size()}, f64);
    mesh->island().all_gather(at::full({1}, value, f64), all)->wait();
    return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
  }

  void log(const std::string& line) const {
    if (display) display->line(line);
  }
};

Trainer::Trainer(const Config& config, const comm::MpiCommunicator& world, std::ostream* out)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.config = config;
  s.is_logger = world.rank() == 0;
  s.out = s.is_logger ? out : nullptr;
  if (s.out) s.display = std::make_unique<ProgressDisplay>(s.out, progress_bar_wanted(), config.train.steps);
  // Phase 1, local checks only (no collectives), so a rank that fails cannot leave its peers
  // waiting in a collective: config, layout and data files.
  std::exception_ptr local_error;
  try {
    throw_if_invalid(config, world.size());
    s.faults = FaultHooks::from_environment();
    s.train_data = std::make_unique<SequenceSource>(config.data.train, config.model.seq, config.model.vocab,
                                                    static_cast<uint64_t>(config.run.seed));
    s.val_data = std::make_unique<SequenceSource>(config.data.val, config.model.seq, config.model.vocab,
                                                  static_cast<uint64_t>(config.run.seed));
    if (config.model.init_from != "none")
      s.initial_weights = read_initial_weights(config.model, config.model.init_from);
    if (config.train.eval_every > 0 && s.val_data->num_sequences() < config.train.eval_sequences)
      throw std::invalid_argument("train.eval_sequences = " + std::to_string(config.train.eval_sequences) +
                                  " but " + config.data.val + " holds only " +
                                  std::to_string(s.val_data->num_sequences()) +
                                  " sequences of model.seq + 1 tokens; lower train.eval_sequences");
  } catch (...) {
    local_error = std::current_exception();
  }
  // Phase 2: agree. The lowest failing rank reports its error; every other rank stops quietly.
  int first_failed = local_error ? world.rank() : world.size();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, world.handle()));
  if (first_failed < world.size()) {
    if (first_failed == world.rank()) {
      try {
        std::rethrow_exception(local_error);
      } catch (const ConfigError&) {
        throw;
      } catch (const std::exception& e) {
        throw StartupError(e.what());  // config, data and init-weight problems: the user's to fix
      }
    }
    throw PeerFailure(first_failed);
  }

  // Phase 3: collective set-up.
  keep_freed_memory_in_heap();
  at::set_num_threads(config.run.threads > 0 ? config.run.threads : default_threads_per_rank(world));
  s.mesh = std::make_unique<comm::DeviceMesh>(
      world,
      comm::MeshShape{config.parallel.islands, config.parallel.pp, config.parallel.dp, config.parallel.tp});
  s.flight = std::make_unique<comm::FlightRecorder>(static_cast<size_t>(config.comm.flight_records));
  s.mesh->record_in(s.flight.get());
  s.control = world.duplicate("world");
  s.control->record_in(s.flight.get());
  s.watchdog = std::make_unique<comm::Watchdog>(
      world, *s.flight, comm::WatchdogOptions{config.comm.timeout_s, config.run.dir + "/flight", kExitHang});
  const std::string table = s.mesh->rank_table(world);
  s.log(config_table(config));
  s.log(table);

  const int tp_size = config.parallel.tp, tp_rank = s.mesh->coord().tp;
  const int pp = config.parallel.pp;
  s.pipeline = {s.mesh->coord().pp, pp, config.parallel.microbatches, config.parallel.chunks_per_stage()};
  const std::vector<ModelPart> parts = model_parts(config, s.pipeline);
  std::vector<parallel::ParamInfo> infos;
  for (const ModelPart& part : parts) {
    const std::vector<parallel::ParamInfo> chunk_infos = LlamaModel::param_infos(config.model, tp_size, part);
    infos.insert(infos.end(), chunk_infos.begin(), chunk_infos.end());
  }
  const int zero = config.parallel.zero;
  // Mixed precision: bf16 parameters and activations; gradients stay fp32 (autograd accumulates
  // the bf16 gradients into them), master weights and AdamW state are fp32 in the engine.
  const at::ScalarType compute_dtype = dtype_named(config.train.precision);
  s.params = std::make_unique<parallel::FlatParameters>(
      backward_order(infos), compute_dtype,
      parallel::zero_layout(zero, config.parallel.dp,
                            static_cast<int64_t>(config.parallel.bucket_mb * 1024 * 1024),
                            /*element_bytes=*/4),
      at::kFloat);
  initialize_parameters(config.model, config.run.seed, *s.params, tp_size, tp_rank);
  if (!s.initial_weights.empty()) {
    load_initial_weights(config.model, s.initial_weights, *s.params, tp_size, tp_rank);
    s.initial_weights.clear();
  }
  s.data_parallel = std::make_unique<parallel::ShardedDataParallel>(
      *s.params, s.mesh->dp(), zero, dtype_named(config.parallel.reduce_dtype));
  parallel::ParameterGate* gate = zero >= 1 ? s.data_parallel.get() : nullptr;
  for (const ModelPart& part : parts)
    s.chunks.push_back(std::make_unique<LlamaModel>(config.model, *s.params, s.mesh->tp(),
                                                    config.parallel.sequence_parallel, part, gate));
  s.step_schedule = pipe::build_schedule(pipe::schedule_kind(config.parallel.schedule, pp), s.pipeline);
  s.executor = std::make_unique<pipe::PipelineExecutor>(s.mesh->pp(), compute_dtype);
  s.optimizer =
      std::make_unique<optim::FlatAdamW>(s.data_parallel->optimizer_values(),
                                         s.data_parallel->optimizer_grads(), decay_segments(*s.data_parallel),
                                         optim::AdamWOptions{config.optim.beta1, config.optim.beta2,
                                                             config.optim.eps, config.optim.weight_decay});
  s.schedule = optim::LrSchedule{config.optim.lr, config.optim.min_lr, config.optim.warmup,
                                 config.train.steps, config.optim.schedule};

  s.make_outer_optimizer();
  s.checkpoints = std::make_unique<TrainerCheckpoints>(s.config, world, *s.mesh, *s.params, *s.data_parallel,
                                                       *s.optimizer, s.outer.get());
  s.step = s.checkpoints->resume([&s](const std::string& line) { s.log(line); });

  // Every rank measures at once, as they will compute at once; the dp average is the peak per rank.
  at::Tensor peak =
      at::full({1}, measure_matmul_peak_flops(compute_dtype), at::TensorOptions().dtype(at::kDouble));
  s.mesh->dp().all_reduce(peak, comm::ReduceOp::kAvg)->wait();
  s.peak_flops = peak.item<double>();

  if (s.is_logger) {
    std::filesystem::create_directories(config.run.dir);
    std::ofstream(config.run.dir + "/config.yaml") << config_to_yaml(config);
    s.metrics = std::make_unique<MetricsLog>(config.run.dir + "/metrics.jsonl");
    s.tensorboard = std::make_unique<TensorBoardWriter>(config.run.dir + "/tb");
    char line[200];
    std::snprintf(
        line, sizeof line,
        "model: %lld parameters per rank (%s %s, ZeRO stage %d) | peak %.1f GFLOP/s per rank x %d ranks",
        static_cast<long long>(s.params->numel()),
        format_bytes(static_cast<double>(s.params->numel() * at::elementSize(compute_dtype))).c_str(),
        config.train.precision.c_str(), zero, s.peak_flops / 1e9, world.size());
    s.log(line);
  } else {
    s.metrics = std::make_unique<MetricsLog>("");
  }
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const {
  return state_->step;
}
const parallel::FlatParameters& Trainer::parameters() const {
  return *state_->params;
}
const comm::DeviceMesh& Trainer::mesh() const {
  return *state_->mesh;
}

std::string Trainer::save_checkpoint() {
  return state_->checkpoints->save(state_->step);
}

std::map<std::string, at::Tensor> Trainer::full_parameters() {
  State& s = *state_;
  s.data_parallel->gather_all();
  std::map<std::string, at::Tensor> out;
  for (const parallel::FlatEntry& e : s.params->entries()) out[e.info.name] = e.value.detach().clone();
  s.data_parallel->release_all();
  return out;
}

parallel::ModelStateBytes Trainer::model_state_bytes() const {
  return state_->model_state_bytes();
}

namespace {

// The pipeline-stage statistics of a step, gathered from every stage of this rank's pipeline.
void gather_stage_stats(comm::Communicator& pp_group, const pipe::PipelineRunStats& stats, StepMetrics& m) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor mine =
      at::tensor({stats.idle_fraction(), static_cast<double>(stats.peak_memory_growth)}, f64);
  const at::Tensor all = at::empty({pp_group.size(), 2}, f64);
  pp_group.all_gather(mine, all.view({-1}))->wait();
  for (int stage = 0; stage < pp_group.size(); ++stage) {
    m.stage_idle.push_back(all[stage][0].item<double>());
    m.stage_activation_bytes.push_back(all[stage][1].item<double>());
  }
}

}  // namespace

StepMetrics Trainer::train_step() {
  State& s = *state_;
  const Config& c = s.config;
  const auto t0 = Clock::now();
  const CommTotals comm_before = comm_totals(*s.mesh);
  const int microbatches = c.parallel.microbatches;
  const int64_t microbatch_size = c.train.global_batch / (s.data_ranks() * microbatches);
  if (s.faults.skip_collective(s.step + 1, s.mesh->rank())) {
    std::cerr << "atoll: fault hook: rank " << s.mesh->rank() << " skips the collectives of step "
              << s.step + 1 << std::endl;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until the watchdog ends the job
  }

  s.data_parallel->start_step(microbatches);
  double local_loss = 0.0;  // on the last stage: the sum of the microbatch losses / microbatches
  pipe::StageCallbacks callbacks;
  callbacks.forward = [&](int chunk, int micro, const at::Tensor& input) {
    const at::Tensor out = s.forward_chunk(chunk, input, [&] {
      const BatchSlice slice =
          batch_slice(s.step, c.train.global_batch, s.data_rank(), s.data_ranks(), micro, microbatches);
      return s.train_data->shuffled(slice.first, slice.count);
    });
    if (!s.pipeline.is_last(chunk)) return out;
    // Each microbatch's mean is scaled by 1/microbatches, so the accumulated gradient is the
    // gradient of the mean over this rank's share of the batch; the dp average does the rest.
    const at::Tensor loss = s.poisons_loss(s.step + 1) ? out * std::nan("") : out / microbatches;
    local_loss += loss.item<double>();
    return loss;
  };
  callbacks.activation_shape = [&](int) { return s.chunks.front()->hidden_shape(microbatch_size); };
  callbacks.memory_in_use = heap_bytes_in_use;
  const pipe::PipelineRunStats pipeline_stats = s.executor->run(s.pipeline, s.step_schedule, callbacks);
  s.data_parallel->finish();
  // Tied embeddings across the first and last stage: each holds a copy, kept equal by summing
  // their gradients (Megatron's embedding group) -- under ZeRO the owned pieces of the copies'
  // buckets, which have the same geometry on both stages (ParamInfo::own_bucket).
  comm::Communicator* embedding_group = s.mesh->embedding();
  if (embedding_group && embedding_group->size() > 1 && c.model.tie_embeddings) {
    const size_t bucket = s.params->entry("model.embed_tokens.weight").bucket;
    embedding_group->all_reduce(s.data_parallel->owned_bucket_gradient(bucket), comm::ReduceOp::kSum)->wait();
  }
  const uint64_t outer_bytes_before = s.island_exchange ? s.island_exchange->bytes_sent() : 0;
  const double outer_wait_before = s.outer ? s.outer->wait_seconds() : 0.0;
  const double island_average_seconds =
      s.islands_average_every_step() ? s.average_gradients_over_islands() : 0.0;

  // The last stage holds the loss: sum over the pipeline, average over data parallelism.
  at::Tensor loss = at::full({1}, local_loss, at::TensorOptions().dtype(at::kDouble));
  if (s.pipeline.stages > 1) s.mesh->pp().all_reduce(loss, comm::ReduceOp::kSum)->wait();
  comm::WorkPtr loss_work = s.mesh->dp().all_reduce(loss, comm::ReduceOp::kAvg);
  // The norm is agreed over the model and dp groups and a NaN anywhere in a gradient (or a loss,
  // whose backward spreads it) reaches it, so every rank of the island decides alike.
  const double grad_norm = s.global_grad_norm();
  const bool finite = std::isfinite(grad_norm);
  const bool stop = !finite && c.train.on_nonfinite == "stop";
  const double lr = s.schedule.at(s.step);
  // A lazy checkpoint's snapshot must be taken before the state changes.
  const double checkpoint_wait = s.checkpoints->fence();
  if (finite) {
    optim::clip_gradients(s.data_parallel->optimizer_grads(), grad_norm, c.optim.grad_clip);
    s.optimizer->step(lr);
  }
  // A skipped step still takes part in the islands' sync schedule; a stop leaves the state as it was.
  if (s.outer && !stop) s.outer->after_inner_step(s.step + 1);  // may move theta: before the copies
  s.data_parallel->after_optimizer_step();
  loss_work->wait();
  // Islands averaging every step talk every step anyway: their loss is the whole job's. With an
  // outer optimizer the loss stays island 0's (a message per step is what islands avoid).
  if (s.islands_average_every_step()) s.mesh->island().all_reduce(loss, comm::ReduceOp::kAvg)->wait();
  if (!stop) ++s.step;

  StepMetrics m;
  m.step = stop ? s.step + 1 : s.step;
  m.nonfinite = !finite;
  m.skipped = !finite && !stop;
  m.loss = loss.item<double>();
  m.lr = lr;
  m.grad_norm = grad_norm;
  m.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double tokens = static_cast<double>(c.train.global_batch) * c.model.seq;
  m.tokens_per_s = tokens / m.step_seconds;
  const int ranks = s.mesh->shape().world_size();
  m.mfu = m.tokens_per_s * training_flops_per_token(c.model) / (s.peak_flops * ranks);
  if (s.pipeline.stages > 1) gather_stage_stats(s.mesh->pp(), pipeline_stats, m);
  const CommTotals comm_after = comm_totals(*s.mesh);
  m.comm_bytes = comm_after.bytes - comm_before.bytes;
  m.tp_bytes = comm_after.tp - comm_before.tp;
  m.dp_bytes = comm_after.dp - comm_before.dp;
  m.pp_bytes = comm_after.pp - comm_before.pp;
  m.comm_wait_seconds = comm_after.wait_seconds - comm_before.wait_seconds;
  m.checkpoint_wait_seconds = checkpoint_wait;
  if (s.island_exchange) {
    m.islands = true;
    m.outer_bytes = s.island_exchange->bytes_sent() - outer_bytes_before;
    m.outer_bytes_total = s.island_exchange->bytes_sent();
    m.outer_wait_seconds = s.outer ? s.outer->wait_seconds() - outer_wait_before : island_average_seconds;
    m.outer_simulated_seconds = s.island_exchange->simulated_seconds();
  }
  m.rss_bytes = resident_memory_bytes();
  const parallel::ModelStateBytes state = s.model_state_bytes();
  m.param_bytes = state.parameters;
  m.grad_bytes = state.gradients;
  m.optimizer_bytes = state.optimizer;
  return m;
}

double Trainer::evaluate() {
  State& s = *state_;
  const Config& c = s.config;
  at::NoGradGuard no_grad;
  // This dp rank's share of the fixed validation sequences, in chunks of one microbatch.
  const comm::ShardRange mine = comm::shard_range(c.train.eval_sequences, c.parallel.dp, s.mesh->coord().dp);
  const int64_t chunk = std::max(1, c.train.global_batch / (c.parallel.dp * c.parallel.microbatches));
  const auto count_of = [&](int micro) { return std::min(chunk, mine.numel - micro * chunk); };
  pipe::PipelineShape shape = s.pipeline;
  shape.microbatches = static_cast<int>((mine.numel + chunk - 1) / chunk);
  double loss_sum = 0.0;  // on the last stage
  if (shape.microbatches > 0) {
    pipe::StageCallbacks callbacks;
    callbacks.forward = [&](int model_chunk, int micro, const at::Tensor& input) {
      const at::Tensor out = s.forward_chunk(model_chunk, input, [&] {
        return s.val_data->in_order(mine.offset + micro * chunk, count_of(micro));
      });
      if (s.pipeline.is_last(model_chunk))
        loss_sum += out.item<double>() * static_cast<double>(count_of(micro));
      return out;
    };
    callbacks.activation_shape = [&](int micro) { return s.chunks.front()->hidden_shape(count_of(micro)); };
    s.executor->run(shape, pipe::forward_only_schedule(shape), callbacks);
  }
  at::Tensor total = at::full({1}, loss_sum, at::TensorOptions().dtype(at::kDouble));
  if (s.pipeline.stages > 1) s.mesh->pp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  s.mesh->dp().all_reduce(total, comm::ReduceOp::kSum)->wait();
  return total.item<double>() / std::max(1, c.train.eval_sequences);
}

double Trainer::evaluate_outer() {
  State& s = *state_;
  if (!s.outer) throw std::logic_error("evaluate_outer: outer.algorithm is none");
  const at::Tensor theta = s.outer->values_copy();
  s.outer->write_values(s.outer->phi());
  s.data_parallel->after_optimizer_step();  // compute copies and ZeRO gathers of phi
  const double loss = evaluate();
  s.outer->write_values(theta);
  s.data_parallel->after_optimizer_step();
  return loss;
}

const optim::outer::OuterOptimizer* Trainer::outer_optimizer() const {
  return state_->outer.get();
}

int Trainer::preempted_by() const {
  return state_->preempted_by;
}

NonFiniteStop::NonFiniteStop(const std::string& message) : std::runtime_error(message) {}
StartupError::StartupError(const std::string& message) : std::runtime_error(message) {}

namespace {

// The scalars TensorBoard shows for a step: the same values as its metrics.jsonl record.
std::vector<std::pair<std::string, double>> step_scalars(const StepMetrics& m) {
  return {{"train/loss", m.loss},
          {"train/lr", m.lr},
          {"train/grad_norm", m.grad_norm},
          {"perf/tokens_per_s", m.tokens_per_s},
          {"perf/mfu", m.mfu},
          {"perf/step_s", m.step_seconds},
          {"comm/bytes", static_cast<double>(m.comm_bytes)},
          {"comm/wait_s", m.comm_wait_seconds},
          {"memory/rss_bytes", static_cast<double>(m.rss_bytes)}};
}

}  // namespace

void Trainer::run() {
  State& s = *state_;
  const Config& c = s.config;
  double interval_tokens_per_s = 0.0;
  int interval_steps = 0;
  int64_t last_saved = -1;  // the step and directory of the newest checkpoint this run saved
  std::string last_dir;
  // A committed checkpoint of the current step, saved now unless the periodic save just did.
  const auto commit_now = [&] {
    const std::string dir = last_saved == s.step ? last_dir : save_checkpoint();
    s.checkpoints->finish();
    return dir;
  };
  s.metrics->write(JsonRecord()
                       .add("event", std::string("start"))
                       .add("step", s.step)
                       .add("world_size", static_cast<int64_t>(s.mesh->shape().world_size())));
  const auto write_scalars = [&s](int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
    if (s.tensorboard) s.tensorboard->add_scalars(step, scalars);
  };
  while (s.step < c.train.steps) {
    StepMetrics m = train_step();
    s.metrics->write(to_json(m));
    write_scalars(m.step, step_scalars(m));
    if (s.display) s.display->step(m.step, m.step_seconds, m.loss);
    if (m.nonfinite) {
      const bool stop = !m.skipped;
      s.metrics->write(JsonRecord()
                           .add("event", std::string("nonfinite"))
                           .add("step", m.step)
                           .add("action", std::string(stop ? "stop" : "skip")));
      char what[200];
      std::snprintf(what, sizeof what, "step %lld: non-finite loss or gradient (loss %g, grad norm %g)",
                    static_cast<long long>(m.step), m.loss, m.grad_norm);
      if (stop) {
        const std::string dir = commit_now();
        throw NonFiniteStop(
            std::string(what) + "; committed " + dir + " with the state before it; lower optim.lr " +
            "or raise optim.grad_clip and resume, or set train.on_nonfinite=skip to skip such steps");
      }
      ++s.skipped_steps;
      s.log(std::string(what) + "; update skipped (" + std::to_string(s.skipped_steps) + " skipped so far)");
    }
    // The first step pays one-time costs (allocator warm-up); keep it out of the interval mean.
    if (m.step > 1) {
      interval_tokens_per_s += m.tokens_per_s;
      ++interval_steps;
    }
    if (m.step % c.train.log_every == 0 || m.step == c.train.steps) {
      if (interval_steps > 0) {
        m.tokens_per_s = interval_tokens_per_s / interval_steps;
        m.mfu = m.tokens_per_s * training_flops_per_token(c.model) /
                (s.peak_flops * s.mesh->shape().world_size());
      }
      s.log(progress_line(m, c.train.steps) + " | ETA " + (s.display ? s.display->eta() : "?"));
      interval_tokens_per_s = 0.0;
      interval_steps = 0;
    }
    if (c.checkpoint.every > 0 && (m.step % c.checkpoint.every == 0 || m.step == c.train.steps)) {
      const auto t0 = Clock::now();
      const std::string dir = save_checkpoint();
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      last_saved = m.step;
      last_dir = dir;
      s.metrics->write(JsonRecord().add("step", m.step).add("checkpoint_s", seconds));
      write_scalars(m.step, {{"checkpoint/seconds", seconds}});
      char line[512];
      std::snprintf(line, sizeof line, "step %5lld/%d | checkpoint %s (%.2f s)",
                    static_cast<long long>(m.step), c.train.steps, dir.c_str(), seconds);
      s.log(line);
    }
    const bool eval_due =
        c.train.eval_every > 0 && (m.step % c.train.eval_every == 0 || m.step == c.train.steps);
    if (eval_due && c.train.eval_sequences > 0) {
      const double val_loss = evaluate();
      JsonRecord record = JsonRecord().add("step", m.step).add("val_loss", val_loss);
      char line[160];
      int length = std::snprintf(line, sizeof line, "step %5lld/%d | val loss %.4f",
                                 static_cast<long long>(m.step), c.train.steps, val_loss);
      if (s.outer) {  // every island's theta (island 0's above) and phi, what the islands agree on
        const std::vector<double> islands = s.gather_over_islands(val_loss);
        const double outer_loss = evaluate_outer();
        record.add("val_loss_islands", islands).add("val_loss_outer", outer_loss);
        std::snprintf(line + length, sizeof line - static_cast<size_t>(length),
                      " (island 0; islands %.4f-%.4f) | outer %.4f",
                      *std::min_element(islands.begin(), islands.end()),
                      *std::max_element(islands.begin(), islands.end()), outer_loss);
      }
      s.metrics->write(record);
      write_scalars(m.step, {{"val/loss", val_loss}});
      s.log(line);
    }
    if (const int signal = s.preemption.agreed_signal(*s.control)) {
      // Preempted: this step is done; commit it synchronously and leave.
      const std::string dir = commit_now();
      s.metrics->write(JsonRecord()
                           .add("event", std::string("preempted"))
                           .add("step", m.step)
                           .add("signal", static_cast<int64_t>(signal)));
      s.log("preempted by " + signal_name(signal) + " at step " + std::to_string(m.step) + ": " + dir +
            " committed; run again with checkpoint.resume=auto (the default) to continue");
      s.preempted_by = signal;
      return;
    }
  }
  const std::string committed = s.checkpoints->finish();
  if (!committed.empty()) s.log("checkpoint: " + committed + " committed");
}

}  // namespace atl::runtime
