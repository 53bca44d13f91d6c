// The parallel section: its rows of the field table and the rules on the layout -- the job's rank
// count, the batch split, what tensor and sequence parallelism split, the pipeline's stages.
#include "runtime/config/config_fields.h"

#include "parallel/pipeline/stage_layout.h"

namespace atl::runtime::config_detail {

namespace {

// parallel.stage_layers: a list of layer counts, one per virtual stage (empty: an even split).
Field stage_layers_field() {
  Field f{"parallel",
          "stage_layers",
          nullptr,
          nullptr,
          {"parallel", "stage_layers", "list", "[]", "integers >= 1 summing to model.layers",
           "Layers per virtual stage, first to last; []: an even split."}};
  f.read = [](Config& c, const YAML::Node& node) -> std::string {
    std::vector<int> counts;
    try {
      if (!node.IsSequence()) throw YAML::Exception(YAML::Mark(), "not a list");
      for (const YAML::Node& item : node) counts.push_back(item.as<int>());
    } catch (const YAML::Exception&) {
      return "config: parallel.stage_layers = " + quoted(node) +
             " is not a list of integers; write e.g. parallel.stage_layers: [3, 5] (layers per virtual "
             "stage)";
    }
    c.parallel.stage_layers = counts;
    return "";
  };
  f.show = [](const Config& c) {
    std::string list;
    for (int count : c.parallel.stage_layers) list += (list.empty() ? "" : ", ") + std::to_string(count);
    return "[" + list + "]";
  };
  return f;
}

}  // namespace

std::vector<Field> parallel_fields() {
  const SectionFields<ParallelConfig> parallel{"parallel", &Config::parallel};
  return {
      parallel("islands", &ParallelConfig::islands,
               "Model replicas that train apart and meet through outer.algorithm.", at_least(1)),
      parallel("pp", &ParallelConfig::pp, "Pipeline stages; model.layers are split over them.", at_least(1)),
      parallel("dp", &ParallelConfig::dp, "Data-parallel ranks per island (ZeRO shards over them).",
               at_least(1)),
      parallel("tp", &ParallelConfig::tp, "Tensor-parallel ranks: heads and the MLP width split over them.",
               at_least(1)),
      parallel("cp", &ParallelConfig::cp,
               "Context-parallel ranks: each sequence in 2*cp chunks, two per rank, attention by ring "
               "(gradients reduce and ZeRO shards over dp*cp).",
               at_least(1)),
      parallel("zero", &ParallelConfig::zero,
               "ZeRO stage over dp: 0 none, 1 optimizer state, 2 and gradients, 3 and parameters sharded.",
               between(0, 3)),
      parallel("microbatches", &ParallelConfig::microbatches,
               "Microbatches per step on each dp rank (accumulation; the pipeline's units).", at_least(1)),
      parallel("schedule", &ParallelConfig::schedule,
               "Pipeline schedule: GPipe, 1F1B, or interleaved 1F1B over parallel.virtual_stages."),
      parallel("virtual_stages", &ParallelConfig::virtual_stages,
               "Model chunks per pipeline rank (interleaved schedule only).", at_least(1)),
      parallel("bucket_mb", &ParallelConfig::bucket_mb,
               "MiB per gradient bucket; full buckets are reduced while backward goes on.", above(0)),
      parallel("reduce_dtype", &ParallelConfig::reduce_dtype,
               "Dtype the dp gradient reduction runs in: fp32 or bf16."),
      parallel("sequence_parallel", &ParallelConfig::sequence_parallel,
               "Megatron sequence parallelism: norms and residuals split along the sequence over tp."),
      stage_layers_field(),
  };
}

void validate_job_size(const Config& c, int world_size, Problems& problems) {
  const ParallelConfig& p = c.parallel;
  const int64_t layout = c.job_ranks();
  const std::string dims = p.cp > 1 ? "pp*dp*tp*cp" : "pp*dp*tp";
  const std::string product = c.islands_are_jobs() ? dims + " (one island per job)" : "islands*" + dims;
  if (layout != world_size)
    problems.push_back("parallel: " + product + " = " + std::to_string(layout) + " but " +
                       std::to_string(world_size) + " ranks were launched; launch " + std::to_string(layout) +
                       " ranks (atoll launch does this) or change the layout");

  // The global batch is the whole job's: every island takes its share of every step's sequences.
  const int64_t split = int64_t{p.islands} * p.dp * p.microbatches;
  require_divisible(problems, "train.global_batch", c.train.global_batch,
                    "parallel.islands*parallel.dp*parallel.microbatches", split,
                    "use a multiple of " + std::to_string(split));
}

void validate_parallel(const Config& c, Problems& problems) {
  const ParallelConfig& p = c.parallel;
  const ModelConfig& m = c.model;
  // Tensor parallelism splits heads, kv heads and the MLP width (and with SP the sequence) over tp.
  const std::string tp_fix = "tensor parallelism splits it evenly, so pick a tp that divides it";
  require_divisible(problems, "model.heads", m.heads, "parallel.tp", p.tp, tp_fix);
  require_divisible(problems, "model.kv_heads", m.kv_heads, "parallel.tp", p.tp, tp_fix);
  require_divisible(problems, "model.ffn", m.ffn, "parallel.tp", p.tp, tp_fix);
  if (p.sequence_parallel)
    require_divisible(problems, "model.seq", m.seq, "parallel.tp", p.tp,
                      "sequence parallelism splits the sequence evenly, so pick a tp that divides it");

  // Context parallelism cuts every sequence into 2*cp equal chunks (two per rank, load-balanced).
  if (p.cp > 1)
    require_divisible(problems, "model.seq", m.seq, "2*parallel.cp", 2 * int64_t{p.cp},
                      "context parallelism cuts each sequence into 2*cp equal chunks, so pick a model.seq "
                      "that 2*cp divides");
  if (p.cp > 1 && p.sequence_parallel)
    require_divisible(problems, "model.seq", m.seq, "parallel.cp*parallel.tp", int64_t{p.cp} * p.tp,
                      "sequence parallelism splits each rank's seq/cp positions over tp, so pick a model.seq "
                      "that cp*tp divides");
  // Pipeline: virtual stages mean interleaved 1F1B, which runs microbatches in rounds of pp.
  const bool interleaved = p.schedule == PipelineSchedule::kInterleaved;
  if (p.virtual_stages > 1 && !interleaved)
    problems.push_back("config: parallel.virtual_stages = " + std::to_string(p.virtual_stages) +
                       " needs parallel.schedule = interleaved, not '" + std::string(name_of(p.schedule)) +
                       "'; set the schedule to interleaved or virtual_stages to 1");
  if (interleaved && p.pp > 1 && p.microbatches < p.pp)
    problems.push_back("config: parallel.microbatches = " + std::to_string(p.microbatches) +
                       " is fewer than parallel.pp = " + std::to_string(p.pp) +
                       "; interleaved 1F1B needs at least one microbatch per stage, so raise microbatches");
  else if (interleaved && p.pp > 1)
    require_divisible(problems, "parallel.microbatches", p.microbatches, "parallel.pp", p.pp,
                      "interleaved 1F1B runs microbatches in rounds of pp; use a multiple of pp");
  if (interleaved && p.pp == 1 && p.virtual_stages > 1)
    problems.push_back("config: parallel.virtual_stages = " + std::to_string(p.virtual_stages) +
                       " with parallel.pp = 1; virtual stages interleave a pipeline, so set pp >= 2 or "
                       "virtual_stages to 1");
  // The split of layers the layout will really run (a stray virtual_stages is reported above).
  if (p.pp >= 1) {  // guards the division in the split; pp < 1 was reported when parsing
    const std::string split =
        parallel::pipeline::stage_layers_problem(m.layers, p.pp, p.chunks_per_stage(), p.stage_layers);
    if (!split.empty()) problems.push_back(split);
  }
}

}  // namespace atl::runtime::config_detail
