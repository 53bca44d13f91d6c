#include "runtime/parallelize.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "atoll/build_config.h"
#include "comm/island_lease.h"
#include "comm/island_rendezvous.h"
#include "comm/message_authenticator.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "optim/grad_clip.h"
#include "optim/outer/sliced_average.h"
#include "parallel/pipeline/stage_layout.h"
#include "runtime/canonical_space.h"

#if ATOLL_CUDA
#include <ATen/cuda/CUDAContextLight.h>
#endif

namespace atl::runtime {
namespace {

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

// The parameters of `parts` as tensor parallelism shards them, in backward order: the flat buffers'
// buckets fill as backward produces their gradients, so each bucket's reduction starts early.
std::vector<parallel::ParamInfo> sharded_params_in_backward_order(const Config& config,
                                                                  const std::vector<ModelPart>& parts) {
  std::vector<parallel::ParamInfo> infos;
  for (const ModelPart& part : parts) {
    const std::vector<parallel::ParamInfo> chunk =
        LlamaModel::param_infos(config.model, config.parallel.tp, part);
    infos.insert(infos.end(), chunk.begin(), chunk.end());
  }
  std::reverse(infos.begin(), infos.end());
  return infos;
}

// The runs of the inner optimizer's values that AdamW decays (weights, not norms or biases).
std::vector<optim::DecaySegment> decay_segments(const parallel::ShardedDataParallel& engine) {
  std::vector<optim::DecaySegment> segments;
  for (const parallel::ShardSpan& span :
       engine.owned_spans([](const parallel::FlatEntry& e) { return e.info.weight_decay; }))
    segments.push_back({span.offset, span.numel});
  return segments;
}

// The outer optimizer's fragments in the inner optimizer's coordinates: the whole of every value
// segment, or for Streaming DiLoCo the owned runs of each fragment's layers (layer l in fragment
// l mod P; the embedding goes with layer 0, the final norm and head with the last layer).
std::vector<std::vector<optim::outer::ValueSpan>> outer_fragments(const Config& config,
                                                                  const ParallelLayout& layout) {
  const int fragments =
      config.outer.algorithm == OuterAlgorithm::kStreamingDiLoCo ? config.outer.fragments : 1;
  std::vector<std::vector<optim::outer::ValueSpan>> out(static_cast<size_t>(fragments));
  if (fragments == 1) {
    int64_t offset = 0;
    for (const at::Tensor& segment : layout.data_parallel->optimizer_values()) {
      out[0].push_back({offset, segment.numel()});
      offset += segment.numel();
    }
    return out;
  }
  for (const parallel::ShardedDataParallel::OwnedRun& run : layout.data_parallel->owned_runs()) {
    const int layer = layer_of(layout.params->entries()[run.entry].info.name, config.model.layers);
    out[static_cast<size_t>(layer % fragments)].push_back({run.offset, run.numel});
  }
  return out;
}

// Islands: the exchange between islands and, unless they average every step, the outer optimizer.
// Islands as separate jobs: this rank's island group, over TCP among the ranks with its place in
// every island, met at outer.rendezvous; with the job secret, how its exchanges are authenticated.
// Meeting canonically rank by rank, also the group of every rank of every island.
struct IslandGroupOverTcp {
  std::unique_ptr<comm::Communicator> group;
  std::optional<optim::outer::ExchangeAuthentication> authentication;
  comm::EveryRankGroup every_rank;
  std::optional<optim::outer::ExchangeAuthentication> every_rank_authentication;
};

// The canonical average of islands of different layouts: rank by rank over `every_rank`, or through
// the island's rank 0 (outer.through_leader).
std::unique_ptr<optim::outer::IslandAverage> canonical_average(
    const Config& config, const comm::MpiCommunicator& world, ParallelLayout& layout,
    const std::vector<std::vector<optim::outer::ValueSpan>>& fragments, IslandGroupOverTcp& islands) {
  layout.island_ranks = world.duplicate("island ranks");
  std::vector<optim::outer::CanonicalFragment> canonical = canonical_fragments(config, layout, fragments);
  if (config.outer.through_leader)
    return std::make_unique<optim::outer::CanonicalIslandAverage>(
        *layout.island_ranks, *layout.island_exchange, std::move(canonical));
  layout.every_island_rank = std::move(islands.every_rank.group);
  auto sliced = std::make_unique<optim::outer::SlicedIslandAverage>(
      *layout.island_ranks, *layout.every_island_rank, islands.every_rank.ranks_per_island,
      config.outer.compression, std::move(canonical));
  if (islands.every_rank_authentication) sliced->authenticate(std::move(*islands.every_rank_authentication));
  // Logs and metrics show the island's bytes between islands, as the leader path's rank 0 counts them.
  sliced->report_island_bytes_to(
      [exchange = layout.island_exchange.get()](uint64_t bytes) { exchange->count_sent(bytes); });
  return sliced;
}

void add_islands(const Config& config, const comm::MpiCommunicator& world, ParallelLayout& layout,
                 IslandGroupOverTcp& islands) {
  std::optional<optim::outer::ExchangeAuthentication>& authentication = islands.authentication;
  const OuterConfig& o = config.outer;
  if (config.parallel.islands == 1 && o.algorithm == OuterAlgorithm::kNone) return;
  layout.island_exchange = std::make_unique<optim::outer::IslandExchange>(
      layout.mesh->island(), o.compression,
      optim::outer::SimulatedLink{o.simulated_bandwidth_mbps, o.simulated_latency_ms});
  if (authentication) layout.island_exchange->authenticate(std::move(*authentication));
  if (o.algorithm == OuterAlgorithm::kNone) return;
  if (o.topk > 0) layout.island_exchange->sparsify(o.topk_encoding());
  const std::vector<std::vector<optim::outer::ValueSpan>> fragments = outer_fragments(config, layout);
  optim::outer::IslandAverage* average = layout.island_exchange.get();
  if (config.islands_meet_canonically()) {
    layout.canonical_average = canonical_average(config, world, layout, fragments, islands);
    average = layout.canonical_average.get();
  }
  // The outer section holds the optimizer's options as they are (OuterConfig derives from them).
  layout.outer =
      std::make_unique<optim::outer::OuterOptimizer>(o, layout.data_parallel->optimizer_values(), fragments,
                                                     *average, static_cast<uint64_t>(config.run.seed));
  std::vector<optim::outer::ValueSpan> counted;
  for (const parallel::ShardSpan& span : layout.norm_spans()) counted.push_back({span.offset, span.numel});
  // The groups live in the mesh (owned by pointer), so they outlive moves of the layout.
  layout.outer->bound_pseudo_gradients(
      o.max_pseudo_grad_norm, counted,
      [groups = layout.norm_groups()](const std::vector<at::Tensor>& pieces) {
        return optim::global_grad_norm(pieces, groups);
      });
}

}  // namespace

std::vector<parallel::ShardSpan> ParallelLayout::norm_spans() const {
  const bool count_replicated = mesh->coord().tp == 0;
  return data_parallel->owned_spans([&](const parallel::FlatEntry& e) {
    return !e.info.duplicate && (count_replicated || !e.info.replicated_in_model_group);
  });
}

std::vector<comm::Communicator*> ParallelLayout::norm_groups() const {
  std::vector<comm::Communicator*> groups{&mesh->model()};
  if (data_parallel->gradients_sharded()) groups.insert(groups.begin(), &mesh->dp());
  return groups;
}

double ParallelLayout::global_grad_norm() const {
  std::vector<at::Tensor> pieces;
  for (const parallel::ShardSpan& span : norm_spans())
    pieces.push_back(data_parallel->optimizer_grads().narrow(0, span.offset, span.numel));
  return optim::global_grad_norm(pieces, norm_groups());
}

parallel::ModelStateBytes ParallelLayout::model_state_bytes() const {
  parallel::ModelStateBytes bytes = data_parallel->state_bytes();
  bytes.optimizer += optimizer->state_bytes();  // the engine counted master weights
  return bytes;
}

at::ScalarType scalar_type(Precision precision) {
  return storage_precision(precision) == Precision::kBf16 ? at::kBFloat16 : at::kFloat;
}

at::ScalarType scalar_type(ReduceDtype dtype) {
  return dtype == ReduceDtype::kBf16 ? at::kBFloat16 : at::kFloat;
}

namespace {

IslandGroupOverTcp island_group_over_tcp(const Config& config, const comm::MpiCommunicator& world) {
  // Meeting canonically, only rank 0 is in the island group; the others hold a group of their own
  // alone (and rank by rank, every rank is in the group of every island's ranks).
  const bool leader_only = config.islands_meet_canonically();
  std::unique_ptr<comm::Communicator> alone;
  if (leader_only) alone = world.split(world.rank(), 0, "island");
  const comm::IslandRendezvousOptions options = rendezvous_options(config, world);
  comm::IslandRendezvous rendezvous(comm::parse_rendezvous(config.outer.rendezvous), options);
  // A round already closed without this island's token is an earlier run's: the islands meet at
  // the next attempt instead. Every island must be there (a fixed membership for now).
  constexpr int kAttempts = 1000;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const comm::RoundMembership round = rendezvous.join(0, attempt);
    if (!round.member()) continue;
    IslandGroupOverTcp out;
    if (leader_only && world.rank() != 0) {
      out.group = std::move(alone);
    } else {
      out.group = rendezvous.group(round, world.rank(), "island");
      if (options.authenticator)
        out.authentication = {options.authenticator, rendezvous.session(round, world.rank())};
    }
    if (leader_only && !config.outer.through_leader) {
      out.every_rank = rendezvous.every_rank_group(round, world.rank(), world.size(), "islands' ranks");
      if (options.authenticator)
        out.every_rank_authentication = {options.authenticator, rendezvous.session(round, -1)};
    }
    return out;
  }
  throw std::runtime_error("outer rendezvous: " + std::to_string(kAttempts) +
                           " rounds closed without this island; restart the rendezvous");
}

// Islands as separate jobs: rank 0 holds this job's island id at the rendezvous for the run. When a
// live job holds it already, every rank of this one stops with the same line.
std::unique_ptr<comm::IslandLease> hold_island_id(const Config& config, const comm::MpiCommunicator& world) {
  std::unique_ptr<comm::IslandLease> lease;
  std::string refusal;
  if (world.rank() == 0) {
    try {
      lease = std::make_unique<comm::IslandLease>(
          comm::parse_rendezvous(config.outer.rendezvous), config.outer.island, comm::process_token(),
          std::chrono::milliseconds(static_cast<int64_t>(config.outer.timeout_s * 1000)),
          std::chrono::milliseconds(static_cast<int64_t>(config.outer.reconnect_s * 1000)));
    } catch (const std::invalid_argument& e) {
      refusal = e.what();
    }
  }
  int length = static_cast<int>(refusal.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, world.handle()));
  refusal.resize(static_cast<size_t>(length));
  MPI_CHECK(MPI_Bcast(refusal.data(), length, MPI_CHAR, 0, world.handle()));
  if (!refusal.empty()) throw std::invalid_argument(refusal);
  return lease;
}

// Why train.precision fp8 under `scaling` cannot run on `device`, or "" where it can.
std::string fp8_unavailable_on(c10::Device device, Fp8Scaling scaling) {
  if (!device.is_cuda()) return "this rank runs on the CPU";
#if ATOLL_CUDA
  const cudaDeviceProp* gpu = at::cuda::getDeviceProperties(device.index());
  const std::string why = fp8_unsupported_on(gpu->major, gpu->minor, scaling);
  if (!why.empty()) return "this rank's GPU (" + std::string(gpu->name) + "): " + why;
#endif
  return "";
}

}  // namespace

KernelLevers resolve_kernels(const Config& config, c10::Device device, bool fp8_emulation) {
  const KernelsConfig& k = config.kernels;
  const bool cuda = device.is_cuda();
  std::vector<std::string> problems;
  if (!cuda && k.fused_clip == KernelChoice::kOn && k.fused_adamw == KernelChoice::kAuto)
    problems.push_back(
        "config: kernels.fused_clip = true cannot apply on the CPU with kernels.fused_adamw = auto (off "
        "on the CPU; clipping's scale is applied inside the fused AdamW kernel); set kernels.fused_adamw: "
        "true, or kernels.fused_clip to auto or false");
  if (!cuda && k.fused_weight_grad == KernelChoice::kOn && k.first_grad_copy == KernelChoice::kAuto &&
      config.parallel.zero <= 1)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply on the CPU with kernels.first_grad_copy = "
        "auto (off on the CPU; the weight gradients are written into the buffer the first gradient copy "
        "fills); set kernels.first_grad_copy: true, or kernels.fused_weight_grad to auto or false");
  // The model's own CUDA kernels: on the CPU an explicit true would quietly run the ATen ops instead.
  for (const auto& [name, choice] :
       {std::pair{"fused_swiglu", k.fused_swiglu}, std::pair{"fused_rope", k.fused_rope},
        std::pair{"fused_cross_entropy", k.fused_cross_entropy}})
    if (!cuda && choice == KernelChoice::kOn)
      problems.push_back("config: kernels." + std::string(name) +
                         " = true cannot apply on the CPU (it is a CUDA kernel of Atoll's own); set it to "
                         "auto (on a GPU, off on the CPU) or false, or run.device: cuda");
  if (config.train.precision == Precision::kFp8 && !(fp8_emulation && !device.is_cuda())) {
    const std::string without = fp8_unavailable_on(device, config.train.fp8_scaling);
    if (!without.empty())
      problems.push_back(
          "config: train.precision = fp8 needs a GPU with FP8 tensor cores (compute capability 8.9+ "
          "tensorwise, 9.0+ rowwise, through LibTorch's _scaled_mm); " +
          without + "; set train.precision: bf16");
  }
  if (!problems.empty()) throw ConfigError(problems);
  KernelLevers levers;
  levers.fused_adamw = kernel_on(k.fused_adamw, cuda);
  levers.fused_clip = levers.fused_adamw && kernel_on(k.fused_clip, cuda);
  levers.first_grad_copy = config.parallel.zero <= 1 && kernel_on(k.first_grad_copy, cuda);
  levers.fused_weight_grad = levers.first_grad_copy && config.train.precision != Precision::kFp8 &&
                             kernel_on(k.fused_weight_grad, cuda);
  return levers;
}

std::string kernels_line(const Config& config, const KernelLevers& levers) {
  const KernelsConfig& k = config.kernels;
  // "NAME on|off", and for auto " (auto)" or " (auto: WHY)" where `blocked` kept it off.
  const auto lever = [](const char* name, KernelChoice choice, bool on, const std::string& blocked) {
    std::string text = std::string(name) + (on ? " on" : " off");
    if (choice == KernelChoice::kAuto)
      text += !on && !blocked.empty() ? " (auto: " + blocked + ")" : " (auto)";
    return text;
  };
  const int zero = config.parallel.zero;
  return "kernels: " + lever("fused_adamw", k.fused_adamw, levers.fused_adamw, "") + ", " +
         lever("fused_clip", k.fused_clip, levers.fused_clip,
               levers.fused_adamw ? "" : "without fused_adamw") +
         ", " +
         lever("first_grad_copy", k.first_grad_copy, levers.first_grad_copy,
               zero >= 2 ? "parallel.zero = " + std::to_string(zero) : "") +
         ", " +
         lever("fused_weight_grad", k.fused_weight_grad, levers.fused_weight_grad,
               !levers.first_grad_copy                     ? "without first_grad_copy"
               : config.train.precision == Precision::kFp8 ? "train.precision = fp8"
                                                           : "");
}

ParallelLayout parallelize(const Config& config, c10::Device device, const comm::MpiCommunicator& world,
                           comm::FlightRecorder* flight,
                           const std::map<std::string, at::Tensor>& initial_weights, bool fp8_emulation) {
  const ParallelConfig& p = config.parallel;
  ParallelLayout layout;
  // Mixed precision: bf16 parameters and activations (fp8 too, its linear products aside); gradients
  // stay fp32 (autograd accumulates the bf16 gradients into them), master weights and AdamW state are
  // fp32 in the engine.
  layout.compute_dtype = scalar_type(config.train.precision);
  layout.device = device;
  layout.kernels = resolve_kernels(config, device, fp8_emulation);

  // The mesh: islands x pp x dp x cp x tp, each group with an NCCL plane for CUDA tensors on a GPU.
  const comm::MeshShape shape{p.islands, p.pp, p.dp, p.tp, p.cp};
  const int cuda_device = device.is_cuda() ? device.index() : -1;
  IslandGroupOverTcp islands;
  if (config.islands_are_jobs()) layout.island_lease = hold_island_id(config, world);
  if (config.islands_are_elastic()) {
    // The island group is each round's (IslandRounds::meet); until the first, this rank alone.
    layout.rounds = std::make_unique<IslandRounds>(config, world);
    layout.mesh = std::make_unique<comm::DeviceMesh>(
        world, shape, cuda_device, layout.rounds->initial_group(world), config.outer.island);
  } else if (config.islands_are_jobs()) {
    islands = island_group_over_tcp(config, world);
    layout.mesh = std::make_unique<comm::DeviceMesh>(world, shape, cuda_device, std::move(islands.group),
                                                     config.outer.island);
  } else {
    layout.mesh = std::make_unique<comm::DeviceMesh>(world, shape, cuda_device);
  }
  layout.mesh->record_in(flight);
  const int tp_rank = layout.mesh->coord().tp;

  // Pipeline parallelism: the layers of this rank's stage, one chunk or (interleaved) several.
  layout.pipeline = {layout.mesh->coord().pp, p.pp, p.microbatches, p.chunks_per_stage()};
  const std::vector<ModelPart> parts = model_parts(config, layout.pipeline);

  // Tensor parallelism: this rank's shard of the chunks' parameters, in flat buffers laid out
  // (buckets, shard padding) for the ZeRO stage.
  layout.params = std::make_unique<parallel::FlatParameters>(
      sharded_params_in_backward_order(config, parts), layout.compute_dtype,
      parallel::zero_layout(p.zero, p.dp * p.cp, static_cast<int64_t>(p.bucket_mb * 1024 * 1024),
                            /*element_bytes=*/4),
      at::kFloat, device);
  initialize_parameters(config.model, config.run.seed, *layout.params, p.tp, tp_rank);
  if (!initial_weights.empty())
    load_initial_weights(config.model, initial_weights, *layout.params, p.tp, tp_rank);

  // Sharded data parallelism (ZeRO 0-3) over the dp group (its dp x cp ranks). From ZeRO-1 on the model asks
  // the engine for each unit's parameters before using them (ZeRO-3 gathers them then).
  const KernelLevers& levers = layout.kernels;
  layout.data_parallel = std::make_unique<parallel::ShardedDataParallel>(
      *layout.params, layout.mesh->dp(), p.zero, scalar_type(p.reduce_dtype), levers.first_grad_copy,
      levers.fused_weight_grad);
  parallel::ParameterGate* gate = p.zero >= 1 ? layout.data_parallel.get() : nullptr;
  const ModelKernels kernels{kernel_on(config.kernels.fused_rms_norm, device.is_cuda()),
                             kernel_on(config.kernels.native_gqa, device.is_cuda()),
                             kernel_on(config.kernels.fused_swiglu, device.is_cuda()),
                             kernel_on(config.kernels.fused_rope, device.is_cuda()),
                             kernel_on(config.kernels.fused_cross_entropy, device.is_cuda())};
  // FP8: the decoder layers' linear products (fp8_linear.h), one weight cache for all chunks.
  if (config.train.precision == Precision::kFp8)
    layout.fp8 = std::make_unique<Fp8Linears>(Fp8Recipe::with_scaling(config.train.fp8_scaling));
  for (const ModelPart& part : parts)
    layout.chunks.push_back(std::make_unique<LlamaModel>(
        config.model, *layout.params, layout.mesh->tp(), p.sequence_parallel, part, gate, kernels,
        config.train.recompute, levers.fused_weight_grad ? layout.data_parallel.get() : nullptr,
        layout.fp8.get(), p.cp > 1 ? &layout.mesh->cp() : nullptr));

  // The schedule the stage runs its microbatches in, and the executor that runs it over the pp group.
  layout.schedule = pipe::build_schedule(pipe::schedule_on_stages(p.schedule, p.pp), layout.pipeline);
  layout.executor = std::make_unique<pipe::PipelineExecutor>(layout.mesh->pp(), layout.compute_dtype, device);

  // The inner optimizer on what this rank owns (everything, or its ZeRO shard).
  const OptimConfig& o = config.optim;
  layout.optimizer = std::make_unique<optim::FlatAdamW>(
      layout.data_parallel->optimizer_values(), layout.data_parallel->optimizer_grads(),
      decay_segments(*layout.data_parallel),
      optim::AdamWOptions{o.beta1, o.beta2, o.eps, o.weight_decay, levers.fused_adamw, levers.fused_clip});
  layout.lr_schedule = optim::LrSchedule{o.lr, o.min_lr, o.warmup, config.train.steps, o.schedule};

  add_islands(config, world, layout, islands);
  if (layout.rounds) layout.rounds->attach(*layout.island_exchange);
  return layout;
}

}  // namespace atl::runtime
