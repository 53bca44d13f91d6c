#include "launcher/plan.h"

#include "launcher/activation_estimate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "optim/outer/codec.h"
#include "optim/outer/topk_codec.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_layout.h"
#include "runtime/metrics/console_lines.h"
#include "runtime/metrics/metrics.h"
#include "runtime/model/llama.h"

namespace atl::launcher {
namespace {

namespace pipe = parallel::pipeline;
using runtime::Config;
using runtime::format_bytes;
using runtime::formatted;
using runtime::LlamaModel;
using runtime::ModelPart;
using runtime::name_of;
using runtime::OuterConfig;
using runtime::padded_vocab;
using runtime::ParallelConfig;

double ring_all_reduce(double bytes, int n) {
  return n > 1 ? 2.0 * (n - 1) / n * bytes : 0.0;
}
double ring_half(double bytes, int n) {  // reduce-scatter or all-gather
  return n > 1 ? static_cast<double>(n - 1) / n * bytes : 0.0;
}

// Bytes of one value in the compute dtype.
double compute_bytes(const Config& c) {
  return runtime::element_bytes(c.train.precision);
}

}  // namespace

double mixed_precision_state_bytes_per_parameter(int zero_stage, int dp) {
  const double n = dp;
  switch (zero_stage) {
    case 0:
      return 16.0;
    case 1:
      return 4.0 + 12.0 / n;
    case 2:
      return 2.0 + 14.0 / n;
    default:
      return 16.0 / n;
  }
}

namespace {

// The outer optimizer's state and exchange for `owned` elements per rank (IslandExchange's volume:
// 2(k-1)/k of the encoded tensor per average; NoLoCo sends phi and Delta to each partner).
void plan_outer(const Config& c, double owned, StagePlan& s) {
  const OuterConfig& o = c.outer;
  const int k = c.parallel.islands;
  const bool outer_optimizer = o.algorithm != runtime::OuterAlgorithm::kNone;
  if (outer_optimizer) s.outer_state_bytes = (o.topk > 0 ? 12.0 : 8.0) * owned;  // + error feedback
  if (k == 1) return;
  const double encoded =
      static_cast<double>(optim::outer::encoded_bytes(o.compression, static_cast<int64_t>(owned)));
  const double average = 2.0 * (k - 1) / k * encoded;
  if (!outer_optimizer) {
    s.outer_bytes_per_sync = s.outer_bytes_per_step = 2.0 * (k - 1) / k * 4.0 * owned;
    return;
  }
  // Streaming syncs each fragment once per H steps: the whole model per H, as DiLoCo. Top-k sends
  // its sparse message to every other island (no reduce-scatter).
  if (o.algorithm == runtime::OuterAlgorithm::kNoLoCo)
    s.outer_bytes_per_sync = 2.0 * (o.group_size - 1) * encoded;
  else if (o.topk > 0)
    s.outer_bytes_per_sync =
        (k - 1) * static_cast<double>(optim::outer::encoded_bytes(
                      optim::outer::TopkEncoding{o.topk, o.compression}, static_cast<int64_t>(owned)));
  else
    s.outer_bytes_per_sync = average;
  s.outer_bytes_per_step = s.outer_bytes_per_sync / o.inner_steps;
}

}  // namespace

Plan make_plan(const Config& c) {
  const ParallelConfig& p = c.parallel;
  const int world = c.job_ranks();
  const std::vector<std::string> problems = validate_layout(c, world);
  if (!problems.empty()) {
    std::string joined;
    for (const std::string& line : problems) joined += (joined.empty() ? "" : "\n") + line;
    throw std::invalid_argument(joined);
  }
  const int v = p.chunks_per_stage();
  const std::vector<pipe::LayerRange> ranges =
      pipe::virtual_stage_layers(c.model.layers, p.pp, v, p.stage_layers);
  const pipe::ScheduleKind kind = pipe::schedule_on_stages(p.schedule, p.pp);
  const int64_t microbatch = c.train.global_batch / (static_cast<int64_t>(p.islands) * p.dp * p.microbatches);
  // A rank's tokens: its 2 of 2*cp chunks of each sequence.
  const double local_tokens = static_cast<double>(microbatch) * c.model.seq / p.cp;
  const double hidden_bytes = compute_bytes(c) * local_tokens * c.model.dim;
  // Ring attention passes this rank's K and V (kv heads, its tensor-parallel share) around the cp
  // ring: cp-1 hops forward (again in a full recompute's rerun); backward cp-1 hops of K/V and cp
  // of their fp32 gradients, which go all the way round and home.
  const double kv_elements = local_tokens * c.model.kv_heads * (c.model.dim / c.model.heads) / p.tp;
  const double forward_ring = (p.cp - 1) * 2.0 * kv_elements * compute_bytes(c);
  const double cp_bytes_per_layer =
      p.cp > 1 ? forward_ring * (c.train.recompute == runtime::Recompute::kFull ? 2 : 1) + forward_ring +
                     p.cp * 2.0 * kv_elements * 4.0
               : 0.0;
  const double activation_message = p.sequence_parallel ? hidden_bytes / p.tp : hidden_bytes;
  const int64_t vocab_rows = padded_vocab(c.model.vocab, p.tp) / p.tp;

  Plan plan;
  plan.world_size = world;
  for (int stage = 0; stage < p.pp; ++stage) {
    const pipe::PipelineShape shape{stage, p.pp, p.microbatches, v};
    StagePlan s;
    s.stage = stage;
    int layers = 0, tp_collectives = 0;  // per microbatch
    double pp_messages = 0;
    std::map<int, int64_t> linear_elements;  // decoder layers' 2-D weights, by unit (layer)
    for (int chunk = 0; chunk < v; ++chunk) {
      const pipe::LayerRange& r = ranges[shape.virtual_stage(chunk)];
      const ModelPart part{r.first, r.end, shape.is_first(chunk), shape.is_last(chunk)};
      for (const parallel::ParamInfo& info : LlamaModel::param_infos(c.model, p.tp, part)) {
        int64_t n = 1;
        for (int64_t d : info.shape) n *= d;
        s.parameters += n;
        if (info.shape.size() == 2 && info.unit >= 0 && info.unit < c.model.layers)
          linear_elements[info.unit] += n;
      }
      layers += r.count();
      // Per layer two tensor-parallel exits forward and two entries backward (recomputation: the
      // exits again in the rerun); the embedding's exit forward and the head's entry backward.
      const int per_layer = c.train.recompute == runtime::Recompute::kNone ? 4 : 6;
      tp_collectives += per_layer * r.count() + (part.embedding ? 1 : 0) + (part.head ? 1 : 0);
      pp_messages += (shape.is_last(chunk) ? 0 : 1) + (shape.is_first(chunk) ? 0 : 1);
    }
    // ZeRO shards and reduces over the dp x cp ranks (a cp group's ranks hold the same parameters).
    const double params = static_cast<double>(s.parameters), n = static_cast<double>(p.dp) * p.cp;
    const int sharding_ranks = p.dp * p.cp;
    // As ShardedDataParallel allocates them: ZeRO-1 keeps the full gradient buffer that backward
    // fills and the reduce-scattered piece it owns; ZeRO-2/3 free a bucket's gradients once
    // reduce-scattered (between steps only the piece remains); ZeRO-3 keeps only its piece of the
    // parameters.
    // Gradients are fp32 in every precision; bf16 and fp8 add 4-byte fp32 master weights to the optimizer.
    const double master =
        runtime::storage_precision(c.train.precision) == runtime::Precision::kBf16 ? 4.0 : 0.0;
    s.parameter_bytes = compute_bytes(c) * params / (p.zero >= 3 ? n : 1.0);
    s.gradient_bytes = p.zero == 0 ? 4.0 * params : 4.0 * params / n + (p.zero == 1 ? 4.0 * params : 0.0);
    s.optimizer_bytes = (8.0 + master) * params / (p.zero >= 1 ? n : 1.0);
    if (c.train.precision == runtime::Precision::kFp8) {
      int64_t all = 0, largest = 0;
      for (const auto& [unit, elements] : linear_elements) {
        all += elements;
        largest = std::max(largest, elements);
      }
      s.fp8_cache_bytes = 2.0 * static_cast<double>(p.zero >= 3 ? std::min(all, 2 * largest) : all);
    }

    // Chunk-microbatches alive at the peak: GPipe all, 1F1B and interleaved their warmup plus one.
    const int alive = std::min(pipe::warmup_forwards(kind, shape) + 1, p.microbatches * v);
    // The peak: when backward begins (the head's activations and gradient on the last stage), or
    // inside a layer's backward (its rerun, with recomputation, and its gradients), on top of what
    // the layers alive keep.
    const LayerActivations layer = layer_activations(c, microbatch);
    const double kept = alive * (static_cast<double>(layers) / v) * layer.kept;
    const double head = shape.is_last(v - 1) ? head_activation_bytes(c, microbatch, vocab_rows) : 0.0;
    s.activation_bytes = kept + std::max(head, layers > 0 ? layer.rerun + layer.gradients : 0.0);

    // Stage 0 all-reduces once; 1 reduce-scatters once, 2-3 once per microbatch; 1-2 all-gather
    // the updated parameters once, 3 gathers each unit before its forward and its backward.
    const double reduced = runtime::element_bytes(p.reduce_dtype) * params,
                 gathered = compute_bytes(c) * params;
    const int reduce_scatters = p.zero >= 2 ? p.microbatches : 1;
    const int gathers = p.zero >= 3 ? 2 * p.microbatches : 1;
    s.dp_bytes = p.zero == 0 ? ring_all_reduce(reduced, sharding_ranks)
                             : reduce_scatters * ring_half(reduced, sharding_ranks) +
                                   gathers * ring_half(gathered, sharding_ranks);
    s.tp_bytes = p.microbatches * tp_collectives * ring_all_reduce(hidden_bytes, p.tp);
    s.cp_bytes = p.microbatches * layers * cp_bytes_per_layer;
    s.pp_bytes = p.microbatches * pp_messages * activation_message;
    if (c.model.tie_embeddings && p.pp > 1 && (stage == 0 || stage == p.pp - 1))
      s.embedding_bytes = ring_all_reduce(4.0 * static_cast<double>(vocab_rows) * c.model.dim, 2);
    plan_outer(c, params / (p.zero >= 1 ? n : 1.0), s);
    plan.stages.push_back(s);
  }
  return plan;
}

std::string format_plan(const Config& c, const Plan& plan) {
  const ParallelConfig& p = c.parallel;
  std::string out;
  const std::string cp = p.cp > 1 ? " x cp " + std::to_string(p.cp) : "";
  out += formatted(
      "plan: %d ranks = islands %d x pp %d x dp %d%s x tp %d, ZeRO stage %d, %d microbatches (%s)\n",
      plan.world_size, p.islands, p.pp, p.dp, cp.c_str(), p.tp, p.zero, p.microbatches,
      p.pp > 1 ? std::string(name_of(p.schedule)).c_str() : "no pipeline");
  out += "per rank of each stage (" + std::string(name_of(c.train.precision)) +
         " training, fp32 gradients; activations estimated, recompute " +
         std::string(name_of(c.train.recompute)) + "):\n";
  out += formatted("%5s %12s %11s %11s %11s %11s %11s\n", "stage", "parameters", "params", "grads",
                   "optimizer", "state", "activations");
  for (const StagePlan& s : plan.stages) {
    out += formatted("%5d %12lld %11s %11s %11s %11s %11s\n", s.stage, static_cast<long long>(s.parameters),
                     format_bytes(s.parameter_bytes).c_str(), format_bytes(s.gradient_bytes).c_str(),
                     format_bytes(s.optimizer_bytes).c_str(), format_bytes(s.model_state_bytes()).c_str(),
                     format_bytes(s.activation_bytes).c_str());
  }
  if (c.train.precision == runtime::Precision::kFp8) {
    out += "fp8 weight cache per rank (W and W^T in FP8 of each decoder linear weight";
    out += p.zero >= 3 ? ", the two units ZeRO-3 holds gathered):" : "):";
    for (const StagePlan& s : plan.stages)
      out += formatted(" stage %d %s", s.stage, format_bytes(s.fp8_cache_bytes).c_str());
    out += "\n";
  }
  if (c.train.recompute != runtime::Recompute::kNone) {
    const double extra = recompute_flops_per_token(c), step = runtime::training_flops_per_token(c.model);
    out += formatted(
        "recompute %s: the reruns add %.3g GFLOP of matrix products per step (%.1f%% of the step's %.3g "
        "GFLOP)\n",
        std::string(name_of(c.train.recompute)).c_str(), extra * c.train.global_batch * c.model.seq / 1e9,
        100.0 * extra / step, step * c.train.global_batch * c.model.seq / 1e9);
  }
  out += std::string("bytes each rank sends per step, by group") + (p.cp > 1 ? " (dp: over dp x cp)" : "") +
         ":\n";
  out += formatted("%5s %11s %11s %11s %11s", "stage", "dp", "tp", "pp", "embedding");
  out += p.cp > 1 ? formatted(" %11s\n", "cp") : "\n";
  for (const StagePlan& s : plan.stages) {
    out += formatted("%5d %11s %11s %11s %11s", s.stage, format_bytes(s.dp_bytes).c_str(),
                     format_bytes(s.tp_bytes).c_str(), format_bytes(s.pp_bytes).c_str(),
                     format_bytes(s.embedding_bytes).c_str());
    out += p.cp > 1 ? formatted(" %11s\n", format_bytes(s.cp_bytes).c_str()) : "\n";
  }
  const bool outer_optimizer = c.outer.algorithm != runtime::OuterAlgorithm::kNone;
  if (p.islands > 1 || outer_optimizer) {
    const std::string sparsity = c.outer.topk > 0 ? "top-" + std::to_string(c.outer.topk) + "/" +
                                                        std::to_string(optim::outer::kTopkChunk) + " "
                                                  : "";
    out +=
        formatted("islands: %d, outer.algorithm %s, every %d steps, %s%s exchange:\n", p.islands,
                  std::string(name_of(c.outer.algorithm)).c_str(), outer_optimizer ? c.outer.inner_steps : 1,
                  sparsity.c_str(), optim::outer::codec_name(c.outer.compression));
    out += formatted("%5s %13s %13s %13s\n", "stage", "outer state", "sent per sync", "per step");
    for (const StagePlan& s : plan.stages) {
      out += formatted("%5d %13s %13s %13s\n", s.stage, format_bytes(s.outer_state_bytes).c_str(),
                       format_bytes(s.outer_bytes_per_sync).c_str(),
                       format_bytes(s.outer_bytes_per_step).c_str());
    }
  }
  out += formatted(
      "model state per parameter per rank in mixed precision at dp %d (DeepSpeed): DDP %.2f B, "
      "ZeRO-1 %.2f B, ZeRO-2 %.2f B, ZeRO-3 %.2f B\n",
      p.dp, mixed_precision_state_bytes_per_parameter(0, p.dp),
      mixed_precision_state_bytes_per_parameter(1, p.dp), mixed_precision_state_bytes_per_parameter(2, p.dp),
      mixed_precision_state_bytes_per_parameter(3, p.dp));
  return out;
}

namespace {

// The bytes the fullest rank of the plan holds.
double fullest_rank_bytes(const Plan& plan) {
  double most = 0;
  for (const StagePlan& s : plan.stages)
    most = std::max(most, s.model_state_bytes() + s.activation_bytes + s.fp8_cache_bytes);
  return most;
}

}  // namespace

std::string format_fit(const Config& c, const Plan& plan, double device_bytes) {
  const double needed = fullest_rank_bytes(plan);
  const std::string memory = format_bytes(device_bytes);
  if (needed <= device_bytes)
    return formatted("fits: the fullest rank holds %s of its %s (model state and activations)\n",
                     format_bytes(needed).c_str(), memory.c_str());
  std::string out = formatted("does not fit: the fullest rank holds %s, more than its %s\n",
                              format_bytes(needed).c_str(), memory.c_str());
  Config wider = c;
  for (int cp = 2 * c.parallel.cp; cp <= c.model.seq / 2; cp *= 2) {
    wider.parallel.cp = cp;
    if (!validate_layout(wider, wider.job_ranks()).empty()) break;
    const Plan split = make_plan(wider);
    if (fullest_rank_bytes(split) <= device_bytes)
      return out + formatted(
                       "parallel.cp %d would fit: %s on the fullest of %d ranks (each sequence in %d chunks, "
                       "two a rank)\n",
                       cp, format_bytes(fullest_rank_bytes(split)).c_str(), split.world_size, 2 * cp);
  }
  return out +
         "no parallel.cp the sequence splits into brings it under; lower the microbatch (train.global_batch, "
         "parallel.microbatches), recompute (train.recompute), or shard more (parallel.zero, tp, pp)\n";
}

}  // namespace atl::launcher
