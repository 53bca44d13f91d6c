#include "runtime/config/config.h"

#include <yaml-cpp/yaml.h>

#include "comm/message_authenticator.h"
#include "comm/rendezvous_address.h"
#include "optim/outer/topk_codec.h"
#include "parallel/pipeline/stage_layout.h"
#include "runtime/one_line.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

namespace atl::runtime {
namespace {

using Problems = std::vector<std::string>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- Formatting ------------------------------------------------------------------------------------

// The shortest decimal that reads back as the same double (0.0003, not 0.00029999999999999997),
// positional for ordinary magnitudes and scientific (3e-05) for tiny or huge ones, as %g does.
std::string shortest(double v) {
  const bool positional = v == 0 || (std::fabs(v) >= 1e-4 && std::fabs(v) < 1e15);
  char buffer[400];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, v,
                                 positional ? std::chars_format::fixed : std::chars_format::scientific)
                       .ptr;
  return std::string(buffer, end);
}

template <typename T>
std::string show_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, double>)
    return shortest(v);
  else if constexpr (std::is_same_v<T, std::string>)
    return v;
  else if constexpr (std::is_enum_v<T>)
    return std::string(name_of(v));
  else
    return std::to_string(v);
}

// A value as YAML. A double always has a '.' in its mantissa (25.0, 1.0e-05), which YAML 1.1
// readers such as PyYAML need to see a float; a string that would not read back as itself when
// plain ("~", "a: b", " x") is double-quoted.
template <typename T>
std::string yaml_value(const T& v) {
  std::string s = show_value(v);
  if constexpr (std::is_same_v<T, double>) {
    if (std::isfinite(v) && s.find('.') == std::string::npos) s.insert(std::min(s.find('e'), s.size()), ".0");
  } else if constexpr (std::is_same_v<T, std::string>) {
    bool plain_ok = false;
    try {
      const YAML::Node node = YAML::Load("k: " + s)["k"];
      plain_ok = node.IsScalar() && node.Scalar() == s;
    } catch (const YAML::Exception&) {
    }
    if (!plain_ok) {
      YAML::Emitter out;
      out << YAML::DoubleQuoted << s;
      s = out.c_str();
    }
  }
  return s;
}

// A YAML node as the user wrote it, on one line: 'abc', [1, 2], {a: 1}.
std::string quoted(const YAML::Node& node) {
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// ---- Field descriptors -----------------------------------------------------------------------------

// The values a numeric field accepts: an interval whose ends may be open ("> 0", "[0, 1)").
struct Range {
  double min = -kInf;
  double max = kInf;
  bool min_open = false;
  bool max_open = false;

  bool contains(double v) const { return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max); }
  // ">= 1", "> 0", "in [0, 3]", "in [0, 1)".
  std::string describe() const {
    if (max == kInf) return (min_open ? "> " : ">= ") + shortest(min);
    return std::string("in ") + (min_open ? "(" : "[") + shortest(min) + ", " + shortest(max) +
           (max_open ? ")" : "]");
  }
  // What to set instead: "a positive integer", "0 or more", "a value in [0, 3]".
  std::string advice(bool integer) const {
    if (max != kInf) return "a value " + describe();
    if (min == 0 && min_open) return "a positive number";
    if (min == 1 && integer) return "a positive integer";
    return min_open ? "a number above " + shortest(min) : shortest(min) + " or more";
  }
};
Range at_least(double min) {
  return {min, kInf, false, false};
}
Range above(double min) {
  return {min, kInf, true, false};
}
Range between(double min, double max) {
  return {min, max, false, false};
}

// What one field accepts, for checking a value and wording its problem.
struct Rule {
  std::string name;     // "model.dim"
  Range range;          // numbers
  std::string example;  // the default, shown in fixes
};

// Every value problem names the field and the value first: "config: model.dim = 'abc' <what>".
std::string problem(const Rule& rule, const std::string& value, const std::string& what) {
  return "config: " + rule.name + " = " + value + " " + what;
}
std::string write_example(const Rule& rule) {
  return "write e.g. " + rule.name + ": " + rule.example;
}

// Each parse overload stores a valid `node` in `out` and returns "", or returns the problem line.
std::string parse(const Rule& rule, const YAML::Node& node, bool& out) {
  try {
    if (node.IsScalar()) {
      out = node.as<bool>();
      return "";
    }
  } catch (const YAML::Exception&) {
  }
  return problem(rule, quoted(node), "is not a boolean; write " + rule.name + ": true or false");
}

// Numbers are read at the widest type, so that 1e12 for an int reads as "too large", not "not an integer".
template <typename Wide, typename T>
std::string parse_number(const Rule& rule, const YAML::Node& node, T& out, const std::string& kind) {
  Wide wide{};
  try {
    if (!node.IsScalar()) throw YAML::Exception(YAML::Mark(), "not a scalar");
    wide = node.as<Wide>();
  } catch (const YAML::Exception&) {
    return problem(rule, quoted(node), "is not " + kind + "; " + write_example(rule));
  }
  if (!std::isfinite(static_cast<double>(wide)))
    return problem(rule, node.Scalar(), "is not a finite number; " + write_example(rule));
  if (!rule.range.contains(static_cast<double>(wide)))
    return problem(rule, node.Scalar(),
                   "must be " + rule.range.describe() + "; set " + rule.name + " to " +
                       rule.range.advice(std::is_integral_v<T>) + ", e.g. " + rule.example);
  if (wide > static_cast<Wide>(std::numeric_limits<T>::max()))
    return problem(rule, node.Scalar(),
                   "does not fit in " + kind + "; use at most " + show_value(std::numeric_limits<T>::max()));
  out = static_cast<T>(wide);
  return "";
}

std::string parse(const Rule& rule, const YAML::Node& node, double& out) {
  return parse_number<double>(rule, node, out, "a number");
}
std::string parse(const Rule& rule, const YAML::Node& node, int& out) {
  return parse_number<long long>(rule, node, out, "an integer");
}
std::string parse(const Rule& rule, const YAML::Node& node, int64_t& out) {
  return parse_number<long long>(rule, node, out, "an integer");
}

std::string parse(const Rule& rule, const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return problem(rule, quoted(node), "is not a string; " + write_example(rule));
  const std::string value = node.Scalar();
  if (value.empty()) return problem(rule, "''", "is empty; " + write_example(rule));
  out = value;
  return "";
}

// An enum-like field: one of the spellings its Choices<E> lists.
template <typename E>
  requires std::is_enum_v<E>
std::string parse(const Rule& rule, const YAML::Node& node, E& out) {
  std::string value;
  if (std::string problem = parse(rule, node, value); !problem.empty()) return problem;
  std::vector<std::string> names;
  for (const Choice<E>& choice : Choices<E>::list) {
    if (choice.name == value) {
      out = choice.value;
      return "";
    }
    names.emplace_back(choice.name);
  }
  return problem(rule, "'" + value + "'",
                 "is not one of " + joined(names, ", ") + "; set " + rule.name + " to one of them, e.g. " +
                     rule.example);
}

// One config field bound to a member of Config: how to read it from YAML, how to print it, and what
// `atoll config reference` says of it.
struct Field {
  std::string section, key;
  // Stores the value in the config and returns "", or returns the problem line.
  std::function<std::string(Config&, const YAML::Node&)> read;
  std::function<std::string(const Config&)> show;  // as YAML
  ConfigKeyReference reference;                    // its type, allowed values and meaning
  std::string name() const { return section + "." + key; }
};

// The reference's words for a field of type T: its type and the values it allows.
template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "boolean";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_same_v<T, double>)
    return "number";
  else if constexpr (std::is_enum_v<T>)
    return "choice";
  else
    return "string";
}
template <typename T>
std::string allowed_values(const Range& range) {
  std::vector<std::string> names;
  if constexpr (std::is_same_v<T, bool>) {
    names = {"true", "false"};
  } else if constexpr (std::is_enum_v<T>) {
    for (const Choice<T>& choice : Choices<T>::list) names.emplace_back(choice.name);
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (range.min != -kInf || range.max != kInf) return range.describe();
  }
  return joined(names, ", ");
}

// Makes the fields of one section: `model("dim", &ModelConfig::dim, at_least(1))`.
template <typename Section>
struct SectionFields {
  const char* section;
  Section Config::*member;

  // `meaning`: one line for the reference; `range`: what a number accepts. `field` may be a member
  // the section inherits (the outer optimizer's options, which OuterConfig derives from).
  template <typename T, typename Owner>
    requires std::is_base_of_v<Owner, Section>
  Field operator()(const char* key, T Owner::*field, const char* meaning, Range range = {}) const {
    const auto sec = member;
    Rule rule{std::string(section) + "." + key, range, show_value(Config{}.*sec.*field)};
    Field f{
        section,
        key,
        nullptr,
        nullptr,
        {section, key, type_name<T>(), yaml_value(Config{}.*sec.*field), allowed_values<T>(range), meaning}};
    f.read = [sec, field, rule](Config& c, const YAML::Node& node) {
      T value{};
      std::string problem = parse(rule, node, value);
      if (problem.empty()) c.*sec.*field = value;
      return problem;
    };
    f.show = [sec, field](const Config& c) { return yaml_value(c.*sec.*field); };
    return f;
  }
};

// optim.betas: a list of two numbers in [0, 1), mapped to beta1 / beta2.
Field betas_field() {
  Field f{
      "optim",
      "betas",
      nullptr,
      nullptr,
      {"optim", "betas", "list", "[0.9, 0.95]", "two numbers, each in [0, 1)", "AdamW's beta1 and beta2."}};
  f.read = [](Config& c, const YAML::Node& node) -> std::string {
    double b[2];
    try {
      if (!node.IsSequence() || node.size() != 2) throw YAML::Exception(YAML::Mark(), "not a pair");
      b[0] = node[0].as<double>();
      b[1] = node[1].as<double>();
    } catch (const YAML::Exception&) {
      return "config: optim.betas = " + quoted(node) +
             " is not a list of two numbers; write optim.betas: [0.9, 0.95]";
    }
    const Range unit{0, 1, false, true};
    if (!unit.contains(b[0]) || !unit.contains(b[1]))
      return "config: optim.betas = [" + shortest(b[0]) + ", " + shortest(b[1]) + "] must both be " +
             unit.describe() + "; write e.g. optim.betas: [0.9, 0.95]";
    c.optim.beta1 = b[0];
    c.optim.beta2 = b[1];
    return "";
  };
  f.show = [](const Config& c) {
    return "[" + yaml_value(c.optim.beta1) + ", " + yaml_value(c.optim.beta2) + "]";
  };
  return f;
}

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

// Every field, in the order of the YAML contract; parsing, the table and the saved YAML all use it.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = [] {
    const SectionFields<RunConfig> run{"run", &Config::run};
    const SectionFields<ModelConfig> model{"model", &Config::model};
    const SectionFields<ParallelConfig> parallel{"parallel", &Config::parallel};
    const SectionFields<TrainConfig> train{"train", &Config::train};
    const SectionFields<OptimConfig> optim{"optim", &Config::optim};
    const SectionFields<KernelsConfig> kernels{"kernels", &Config::kernels};
    const SectionFields<DataConfig> data{"data", &Config::data};
    const SectionFields<CheckpointConfig> checkpoint{"checkpoint", &Config::checkpoint};
    const SectionFields<OuterConfig> outer{"outer", &Config::outer};
    const SectionFields<CommConfig> comm{"comm", &Config::comm};
    return std::vector<Field>{
        run("dir", &RunConfig::dir,
            "The run's directory: config.yaml, metrics.jsonl, logs, TensorBoard events and, by "
            "default, checkpoints."),
        run("seed", &RunConfig::seed,
            "Seeds the initial weights, the data order and the samples; a seed and a layout repeat a run bit "
            "for bit.",
            at_least(0)),
        run("threads", &RunConfig::threads,
            "Intra-op threads per rank; 0: the CPUs the rank may use (its affinity) over the ranks sharing "
            "them.",
            at_least(0)),
        run("device", &RunConfig::device,
            "Where tensors live; auto: CUDA when each rank on the node has a GPU, else the CPU (an error "
            "when the job asked for GPUs: Slurm's GPU variables or CUDA_VISIBLE_DEVICES)."),
        run("share_gpu", &RunConfig::share_gpu,
            "Lets ranks of a node share one GPU (tests on a one-GPU machine): each gets a NCCL "
            "host id of its own."),
        run("deterministic", &RunConfig::deterministic,
            "Deterministic GPU kernels (and a fixed cuBLAS workspace), so GPU runs repeat bit for "
            "bit; slower."),
        run("mfu_peak_tflops", &RunConfig::mfu_peak_tflops,
            "Per-rank peak TFLOP/s that MFU is measured against (a datasheet figure); 0: a matmul "
            "measured at start-up.",
            at_least(0.0)),
        model("vocab", &ModelConfig::vocab, "Vocabulary size: 256 for bytes, or the tokenizer's piece count.",
              at_least(2)),
        model("dim", &ModelConfig::dim,
              "Width of the residual stream; model.heads must divide it into even head sizes.", at_least(1)),
        model("layers", &ModelConfig::layers, "Decoder layers; split over the pipeline's stages.",
              at_least(1)),
        model("heads", &ModelConfig::heads, "Query heads; divisible by model.kv_heads and by parallel.tp.",
              at_least(1)),
        model("kv_heads", &ModelConfig::kv_heads,
              "Key/value heads (grouped-query attention below model.heads); divisible by parallel.tp.",
              at_least(1)),
        model("ffn", &ModelConfig::ffn, "Hidden width of each SwiGLU MLP; divisible by parallel.tp.",
              at_least(1)),
        model("seq", &ModelConfig::seq,
              "Tokens per sequence (the context); divisible by parallel.tp with sequence parallelism.",
              at_least(1)),
        model("tie_embeddings", &ModelConfig::tie_embeddings,
              "One matrix for the token embedding and the output head."),
        model("rope_theta", &ModelConfig::rope_theta, "Base of the rotary position embedding's frequencies.",
              above(0)),
        model("norm_eps", &ModelConfig::norm_eps, "Epsilon of every RMSNorm.", above(0)),
        model("init_std", &ModelConfig::init_std, "Standard deviation of the weights' normal initialisation.",
              above(0)),
        model("init_from", &ModelConfig::init_from,
              "Weights to start from: a safetensors file (atoll ckpt export) or a Hugging Face Llama "
              "directory; none: random."),
        parallel("islands", &ParallelConfig::islands,
                 "Model replicas that train apart and meet through outer.algorithm.", at_least(1)),
        parallel("pp", &ParallelConfig::pp, "Pipeline stages; model.layers are split over them.",
                 at_least(1)),
        parallel("dp", &ParallelConfig::dp, "Data-parallel ranks per island (ZeRO shards over them).",
                 at_least(1)),
        parallel("tp", &ParallelConfig::tp, "Tensor-parallel ranks: heads and the MLP width split over them.",
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
        parallel("reduce_dtype", &ParallelConfig::reduce_dtype, "Dtype the dp gradient reduction runs in."),
        parallel("sequence_parallel", &ParallelConfig::sequence_parallel,
                 "Megatron sequence parallelism: norms and residuals split along the sequence over tp."),
        stage_layers_field(),
        train("steps", &TrainConfig::steps, "Optimizer steps of the run (the schedule's length).",
              at_least(1)),
        train("global_batch", &TrainConfig::global_batch,
              "Sequences per step over the whole job; a multiple of islands*dp*microbatches.", at_least(1)),
        train("log_every", &TrainConfig::log_every, "Steps between progress lines.", at_least(1)),
        train("eval_every", &TrainConfig::eval_every,
              "Steps between validation losses (and one at the end); 0: never.", at_least(0)),
        train("eval_sequences", &TrainConfig::eval_sequences, "Validation sequences per evaluation.",
              at_least(0)),
        train("sample_every", &TrainConfig::sample_every,
              "Steps between text samples rank 0 prints; 0: never.", at_least(0)),
        train("sample_prompt", &TrainConfig::sample_prompt, "The text the samples continue."),
        train("sample_tokens", &TrainConfig::sample_tokens, "Tokens per sample.", at_least(1)),
        train("profile_start", &TrainConfig::profile_start,
              "First step of a Kineto trace in run.dir/profile (every rank's, and rank 0's time by "
              "kernel); 0: none.",
              at_least(0)),
        train("profile_steps", &TrainConfig::profile_steps,
              "Steps the trace covers from train.profile_start.", at_least(1)),
        train("precision", &TrainConfig::precision,
              "bf16: bf16 compute with fp32 gradients, master weights and optimizer state."),
        train("on_nonfinite", &TrainConfig::on_nonfinite,
              "A NaN/Inf loss or gradient norm: skip the step's update, or stop (checkpoint, exit 3)."),
        train("recompute", &TrainConfig::recompute,
              "Activation recomputation: selective reruns norms, RoPE and SwiGLU; full reruns each layer."),
        optim("lr", &OptimConfig::lr, "Peak learning rate, reached after optim.warmup steps.", above(0)),
        optim("min_lr", &OptimConfig::min_lr, "Learning rate at the end of the decay.", at_least(0)),
        optim("warmup", &OptimConfig::warmup, "Steps of linear warmup from 0 to optim.lr.", at_least(0)),
        betas_field(),
        optim("eps", &OptimConfig::eps, "AdamW's epsilon.", above(0)),
        optim("weight_decay", &OptimConfig::weight_decay,
              "AdamW's decoupled weight decay, on weight matrices (not norms).", at_least(0)),
        optim("grad_clip", &OptimConfig::grad_clip, "Clips the global gradient norm to this; 0: off.",
              at_least(0)),
        optim("schedule", &OptimConfig::schedule,
              "After warmup: cosine to min_lr, constant, or wsd (flat, then linear over the last 20%)."),
        kernels("fused_adamw", &KernelsConfig::fused_adamw,
                "AdamW as ATen's fused multi-tensor kernel; auto: on a GPU."),
        kernels("fused_clip", &KernelsConfig::fused_clip,
                "Gradient clipping inside fused AdamW (its grad_scale) instead of a pass of its own; "
                "with fused AdamW only; auto: on a GPU."),
        kernels("first_grad_copy", &KernelsConfig::first_grad_copy,
                "Each parameter's first gradient of a step copied into the gradient buffer instead of "
                "zeroing it and adding: the same sums, two passes fewer; ZeRO 0-1 only; auto: on a GPU."),
        kernels("fused_weight_grad", &KernelsConfig::fused_weight_grad,
                "Decoder layers' weight gradients written by their matrix product into the gradient "
                "buffer instead of copied there (under bf16 unrounded); where first_grad_copy is on; "
                "auto: on a GPU."),
        kernels("fused_rms_norm", &KernelsConfig::fused_rms_norm,
                "RMSNorm as at::rms_norm's fused kernel; auto: on a GPU."),
        kernels("native_gqa", &KernelsConfig::native_gqa,
                "Grouped-query attention inside SDPA instead of repeated kv heads; auto: on a GPU."),
        kernels("fused_swiglu", &KernelsConfig::fused_swiglu,
                "SwiGLU's silu and product as one CUDA kernel each way, the same values; auto: on a GPU."),
        kernels("fused_rope", &KernelsConfig::fused_rope,
                "RoPE as one CUDA kernel each way, the same values; auto: on a GPU."),
        kernels("fused_cross_entropy", &KernelsConfig::fused_cross_entropy,
                "The loss as two CUDA kernels over the logits in their own type (no fp32 copy), "
                "the same value up to the order of fp32 sums; tp = 1 only; auto: on a GPU."),
        kernels("attention", &KernelsConfig::attention,
                "The fused attention kernel SDPA tries first on a GPU (flash attention 2, cuDNN's, "
                "memory-efficient), the next where it cannot take the shapes; auto: LibTorch's order."),
        data("train", &DataConfig::train, "Token shard to train on (atoll data prepare writes it)."),
        data("val", &DataConfig::val, "Token shard of the validation loss."),
        data("tokenizer", &DataConfig::tokenizer,
             "What the ids mean: bytes, or the SentencePiece model the shards were encoded with."),
        checkpoint("dir", &CheckpointConfig::dir, "Where checkpoints go; auto: <run.dir>/checkpoints."),
        checkpoint("every", &CheckpointConfig::every,
                   "Steps between checkpoints (and one at the end); 0: never.", at_least(0)),
        checkpoint("keep", &CheckpointConfig::keep,
                   "Committed checkpoints kept; the newest is never deleted.", at_least(1)),
        checkpoint("keep_every", &CheckpointConfig::keep_every,
                   "Also keeps every checkpoint whose step is a multiple of this; 0: none.", at_least(0)),
        checkpoint("mode", &CheckpointConfig::mode,
                   "sync waits for the write; async copies to host memory and writes behind; async_lazy "
                   "defers the copy too."),
        checkpoint("resume", &CheckpointConfig::resume,
                   "auto: the newest valid checkpoint in checkpoint.dir, if any; none; or a "
                   "checkpoint directory."),
        outer("algorithm", &OuterConfig::algorithm,
              "How islands meet: none averages gradients every step; the others every outer.inner_steps."),
        outer("inner_steps", &OuterConfig::inner_steps, "H: inner steps between outer syncs.", at_least(1)),
        outer("lr", &OuterConfig::lr, "Outer learning rate (noloco: 0.7 unless given).", above(0)),
        outer("momentum", &OuterConfig::momentum,
              "Outer momentum; 0: plain averaging (noloco: 0.5 unless given).", Range{0, 1, false, true}),
        outer("nesterov", &OuterConfig::nesterov, "Nesterov form of the outer momentum."),
        outer("fragments", &OuterConfig::fragments,
              "streaming_diloco: fragments of strided layers, one synced every inner_steps/fragments steps.",
              at_least(1)),
        outer("delay", &OuterConfig::delay,
              "streaming_diloco: steps an exchange overlaps before it lands; below inner_steps/fragments.",
              at_least(0)),
        outer("mix", &OuterConfig::mix,
              "streaming_diloco: theta = mix*theta + (1-mix)*phi when a fragment lands.",
              Range{0, 1, false, false}),
        outer("group_size", &OuterConfig::group_size, "noloco: islands per gossip group.", at_least(2)),
        outer("gamma", &OuterConfig::gamma, "noloco: pull towards the group mean (outer.lr unless given).",
              at_least(0)),
        outer("delayed", &OuterConfig::delayed,
              "diloco: round t's reduce overlaps round t+1's inner steps (one-step delay)."),
        outer("compression", &OuterConfig::compression, "Encoding of the exchanged pseudo-gradients."),
        outer("topk", &OuterConfig::topk,
              "SparseLoCo: send the topk largest of every 256 values, keep the rest as error "
              "feedback; 0: dense.",
              Range{0, static_cast<double>(optim::outer::kTopkChunk)}),
        outer("max_pseudo_grad_norm", &OuterConfig::max_pseudo_grad_norm,
              "Leaves out of a round an island whose pseudo-gradient is longer (L2); 0: no bound.",
              at_least(0)),
        outer("simulated_bandwidth_mbps", &OuterConfig::simulated_bandwidth_mbps,
              "Delays the outer exchange as over a link of this many Mbit/s; 0: no delay.", at_least(0)),
        outer("simulated_latency_ms", &OuterConfig::simulated_latency_ms,
              "Latency per message of the simulated link.", at_least(0)),
        outer("rendezvous", &OuterConfig::rendezvous,
              "Islands as separate jobs: HOST:PORT of their atoll rendezvous; none: one job holds all."),
        outer("island", &OuterConfig::island,
              "With a rendezvous: this job's island, 0 to parallel.islands-1.", at_least(-1)),
        outer("timeout_s", &OuterConfig::timeout_s,
              "With a rendezvous: seconds the islands wait for each other.", above(0)),
        outer("secret_file", &OuterConfig::secret_file,
              "With a rendezvous: the job's secret (>= 16 bytes, mode 600); required off loopback."),
        outer("min_islands", &OuterConfig::min_islands,
              "With a rendezvous: islands a round needs to close; 0: every island (fixed membership).",
              at_least(0)),
        outer("grace_s", &OuterConfig::grace_s,
              "With min_islands: seconds a round waits for more once min_islands are there.", above(0)),
        comm("timeout_s", &CommConfig::timeout_s,
             "Seconds a collective may wait before every rank aborts with a dump (exit 4).", above(0)),
        comm("flight_records", &CommConfig::flight_records,
             "Collectives kept per rank for the hang dump (<run.dir>/flight/).", at_least(1)),
    };
  }();
  return table;
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const Field& f : fields())
    if (std::find(names.begin(), names.end(), f.section) == names.end()) names.push_back(f.section);
  return names;
}

bool is_section(const std::string& section) {
  const std::vector<std::string> names = section_names();
  return std::find(names.begin(), names.end(), section) != names.end();
}

const Field* find_field(const std::string& section, const std::string& key) {
  for (const Field& f : fields())
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const Field& f : fields())
    if (f.section == section) keys.push_back(f.key);
  return keys;
}

// ---- Did you mean ----------------------------------------------------------------------------------

// Edit distance counting a swap of neighbours as one edit ("modle" -> "model" is 1).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `wrong` within about a third of its length in edits, or "".
std::string closest(const std::string& wrong, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, wrong.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(wrong, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

// The known 'section.key' a mistyped one most likely meant: a close key in the (closest) section, or
// the same key in another section ("model.lr" -> "optim.lr"); "" when nothing is close.
std::string closest_field(const std::string& section, const std::string& key) {
  const std::string s = is_section(section) ? section : closest(section, section_names());
  if (!s.empty()) {
    if (find_field(s, key)) return s + "." + key;
    const std::string k = closest(key, keys_of(s));
    if (!k.empty()) return s + "." + k;
  }
  for (const Field& f : fields())
    if (f.key == key) return f.name();
  return "";
}

std::string unknown_key_problem(const std::string& section, const std::string& key) {
  const std::string guess = closest_field(section, key);
  const std::string fix = !guess.empty()        ? " (did you mean '" + guess + "'?)"
                          : is_section(section) ? "; " + section + " has " + joined(keys_of(section), ", ")
                                                : "; the sections are " + joined(section_names(), ", ");
  return "unknown key '" + section + "." + key + "'" + fix;
}

// ---- Parsing ---------------------------------------------------------------------------------------

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// A map key as text (keys are normally plain words; anything else is shown as YAML).
std::string key_text(const YAML::Node& key) {
  return key.IsScalar() ? key.Scalar() : quoted(key);
}

// Applies "section.key=value" to the YAML tree, creating the section if the file has none.
void apply_override(YAML::Node& root, const std::string& text, Problems& problems) {
  const std::string prefix = "config: --set " + text + ": ";
  const size_t eq = text.find('=');
  const size_t dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    problems.push_back(prefix + "expected section.key=value, e.g. --set optim.lr=1e-3");
    return;
  }
  const std::string section = trimmed(text.substr(0, dot)), key = trimmed(text.substr(dot + 1, eq - dot - 1));
  if (!find_field(section, key)) {
    problems.push_back(prefix + unknown_key_problem(section, key));
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    problems.push_back(prefix + "the value is not valid YAML (" + e.msg + "); quote it or fix its brackets");
    return;
  }
  // A section given as something other than a map is reported when the sections are read.
  if (!root[section].IsDefined() || root[section].IsNull()) root[section] = YAML::Node(YAML::NodeType::Map);
  if (root[section].IsMap()) root[section][key] = value;
}

// Reads one section's map into the config; the names of fields with a bad value go to `rejected`.
void read_section(const std::string& section, const YAML::Node& body, Config& config,
                  std::set<std::string>& rejected, Problems& problems) {
  if (body.IsNull()) return;  // "model:" with nothing under it: all defaults
  if (!body.IsMap()) {
    problems.push_back("config: section '" + section + "' = " + quoted(body) + " is not a map; write it as " +
                       section + ": { key: value, ... }");
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : body) {
    const std::string key = key_text(entry.first);
    const Field* field = find_field(section, key);
    if (!field) {
      problems.push_back("config: " + unknown_key_problem(section, key));
    } else if (!seen.insert(key).second) {
      problems.push_back("config: " + field->name() + " is given twice; keep one");
    } else if (std::string problem = field->read(config, entry.second); !problem.empty()) {
      problems.push_back(problem);
      rejected.insert(field->name());
    }
  }
}

// NoLoCo's paper defaults differ from DiLoCo's: lr 0.7, momentum 0.5 and gamma = outer.lr, used
// when the file leaves those fields out.
void apply_outer_defaults(const YAML::Node& root, Config& config) {
  const YAML::Node outer = root["outer"];
  const auto given = [&outer](const char* key) {
    return outer.IsDefined() && outer.IsMap() && outer[key].IsDefined();
  };
  if (config.outer.algorithm == OuterAlgorithm::kNoLoCo) {
    if (!given("lr")) config.outer.lr = 0.7;
    if (!given("momentum")) config.outer.momentum = 0.5;
  }
  if (!given("gamma")) config.outer.gamma = config.outer.lr;
}

}  // namespace

namespace {

// A problem quotes what the user wrote (an override, a key, a value), which may hold line breaks:
// each problem stays one line.
std::vector<std::string> one_line_each(const std::vector<std::string>& problems) {
  std::vector<std::string> lines;
  for (const std::string& problem : problems) lines.push_back(one_line(problem));
  return lines;
}

}  // namespace

ConfigError::ConfigError(const std::vector<std::string>& problems)
    : ConfigError(one_line_each(problems), 0) {}

ConfigError::ConfigError(std::vector<std::string> lines, int)
    : std::runtime_error(joined(lines, "\n")), problems_(std::move(lines)) {}

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError({"config: not valid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
                       std::to_string(e.mark.column + 1) + ": " + e.msg + "; fix the syntax there"});
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError({"config: the top level is " + quoted(root) + ", not a map of sections; write " +
                       joined(section_names(), ":, ") + ": as top-level keys"});

  Problems problems;
  for (const std::string& o : overrides) apply_override(root, o, problems);

  Config config;
  std::set<std::string> sections_seen, rejected;
  for (const auto& entry : root) {
    const std::string section = key_text(entry.first);
    if (!is_section(section)) {
      const std::string guess = closest(section, section_names());
      problems.push_back("config: unknown section '" + section + "'" +
                         (guess.empty() ? "; the sections are " + joined(section_names(), ", ")
                                        : " (did you mean '" + guess + "'?)"));
    } else if (!sections_seen.insert(section).second) {
      problems.push_back("config: section '" + section + "' is given twice; merge the two into one");
    } else {
      read_section(section, entry.second, config, rejected, problems);
    }
  }
  apply_outer_defaults(root, config);
  // The one check across fields that needs no layout, made only when both values are valid.
  if (!rejected.count("optim.lr") && !rejected.count("optim.min_lr") && config.optim.min_lr > config.optim.lr)
    problems.push_back("config: optim.min_lr = " + shortest(config.optim.min_lr) +
                       " exceeds optim.lr = " + shortest(config.optim.lr) +
                       "; set optim.min_lr <= optim.lr (the schedule decays from lr down to min_lr)");
  if (!problems.empty()) throw ConfigError(problems);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError({"config: cannot read " + path + ": it is a directory; check the path"});
  std::ifstream in(path);
  if (!in)
    throw ConfigError({"config: cannot read " + path + ": " + std::strerror(errno) + "; check the path"});
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError({"config: cannot read " + path + ": read error; check the path"});
  return parse_config(text.str(), overrides);
}

namespace {

// Appends "config: A = a is not divisible by B = b; <fix>" unless b divides a.
void require_divisible(Problems& problems, const std::string& a_name, int64_t a, const std::string& b_name,
                       int64_t b, const std::string& fix) {
  if (b > 0 && a % b != 0)
    problems.push_back("config: " + a_name + " = " + std::to_string(a) + " is not divisible by " + b_name +
                       " = " + std::to_string(b) + "; " + fix);
}

// The outer optimizer's fields that depend on each other and on the island count.
// Islands as separate jobs: where they meet and which island this job is.
void validate_island_jobs(const Config& c, Problems& problems) {
  const OuterConfig& o = c.outer;
  if (!c.islands_are_jobs()) {
    if (o.has_secret())
      problems.push_back(
          "config: outer.secret_file applies only with outer.rendezvous (islands as separate "
          "jobs); set outer.rendezvous: HOST:PORT or drop outer.secret_file");
    if (o.min_islands != 0)
      problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                         " applies only with outer.rendezvous (islands as separate jobs); drop it or set "
                         "outer.rendezvous: HOST:PORT");
    if (o.island != -1)
      problems.push_back(
          "config: outer.island = " + std::to_string(o.island) +
          " applies only with outer.rendezvous (islands as separate jobs); set outer.rendezvous: "
          "HOST:PORT or drop outer.island");
    return;
  }
  try {
    const comm::RendezvousAddress address = comm::parse_rendezvous(o.rendezvous);
    if (!o.has_secret() && !comm::is_loopback_host(address.host))
      problems.push_back("config: outer.secret_file is required: outer.rendezvous = '" + o.rendezvous +
                         "' is not a loopback address, and islands meeting over a network must prove the "
                         "job's secret; make one with `openssl rand -hex 32 > FILE && chmod 600 FILE`, copy "
                         "it to every island and set outer.secret_file: FILE");
  } catch (const std::invalid_argument& e) {
    problems.push_back(std::string("config: ") + e.what());
  }
  if (o.has_secret()) {
    try {
      comm::MessageAuthenticator::from_file(o.secret_file);
    } catch (const std::invalid_argument& e) {
      problems.push_back(std::string("config: ") + e.what());
    }
  }
  if (o.min_islands > c.parallel.islands)
    problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                       " exceeds parallel.islands = " + std::to_string(c.parallel.islands) +
                       "; a round cannot wait for more islands than there are");
  if (c.islands_are_elastic() && (o.algorithm != OuterAlgorithm::kDiLoCo || o.delayed))
    problems.push_back("config: outer.min_islands = " + std::to_string(o.min_islands) +
                       " below parallel.islands (a membership per round) works with outer.algorithm: diloco "
                       "(not delayed) for now; set outer.min_islands: " +
                       std::to_string(c.parallel.islands) + " or outer.algorithm: diloco");
  if (o.island < 0 || o.island >= c.parallel.islands)
    problems.push_back("config: outer.island = " + std::to_string(o.island) +
                       " must name this job's island, 0 to " + std::to_string(c.parallel.islands - 1) +
                       " (parallel.islands is the number of islands); pass --set outer.island=I");
}

void validate_outer(const Config& c, Problems& problems) {
  validate_island_jobs(c, problems);
  const OuterConfig& o = c.outer;
  const OuterAlgorithm algorithm = o.algorithm;
  const std::string algorithm_name(name_of(algorithm));
  if (o.fragments > 1 && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.fragments = " + std::to_string(o.fragments) +
                       " applies to outer.algorithm = streaming_diloco, not '" + algorithm_name +
                       "'; set outer.algorithm: streaming_diloco or outer.fragments: 1");
  if (o.delay > 0 && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.delay = " + std::to_string(o.delay) +
                       " applies to outer.algorithm = streaming_diloco; use outer.delayed: true for "
                       "one-step-delayed DiLoCo, or set outer.delay: 0");
  if (o.delayed && algorithm != OuterAlgorithm::kDiLoCo)
    problems.push_back("config: outer.delayed = true applies to outer.algorithm = diloco, not '" +
                       algorithm_name + "'; set outer.algorithm: diloco or outer.delayed: false");
  if (algorithm == OuterAlgorithm::kStreamingDiLoCo) {
    require_divisible(problems, "outer.inner_steps", o.inner_steps, "outer.fragments", o.fragments,
                      "one fragment syncs every inner_steps/fragments steps; use a multiple of fragments");
    const int period = o.inner_steps / o.fragments;
    if (o.inner_steps % o.fragments == 0 && o.delay >= period)
      problems.push_back("config: outer.delay = " + std::to_string(o.delay) +
                         " must be below outer.inner_steps/outer.fragments = " + std::to_string(period) +
                         " (an exchange must land before its fragment's next one starts); lower outer.delay");
    if (o.fragments > c.model.layers)
      problems.push_back("config: outer.fragments = " + std::to_string(o.fragments) +
                         " exceeds model.layers = " + std::to_string(c.model.layers) +
                         " (fragments are strided layers); use at most that many fragments");
  }
  if (o.max_pseudo_grad_norm > 0 && algorithm != OuterAlgorithm::kDiLoCo &&
      algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back("config: outer.max_pseudo_grad_norm = " + shortest(o.max_pseudo_grad_norm) +
                       " applies to outer.algorithm = diloco or streaming_diloco (an average of "
                       "pseudo-gradients), not '" +
                       algorithm_name + "'; set outer.max_pseudo_grad_norm: 0");
  if (o.topk > 0 && algorithm != OuterAlgorithm::kDiLoCo && algorithm != OuterAlgorithm::kStreamingDiLoCo)
    problems.push_back(
        "config: outer.topk = " + std::to_string(o.topk) +
        " applies to outer.algorithm = diloco or streaming_diloco (a pseudo-gradient with error "
        "feedback), not '" +
        algorithm_name + "'; set outer.algorithm: diloco or outer.topk: 0");
  if (o.topk > 0 && c.islands_meet_canonically())
    problems.push_back(
        "config: outer.topk = " + std::to_string(o.topk) +
        " is not supported yet for island jobs of a fixed membership (they average in the "
        "canonical space, where error feedback would not match what was sent); set "
        "outer.min_islands below parallel.islands, run the islands in one job, or set outer.topk: 0");
  if (algorithm == OuterAlgorithm::kNoLoCo && c.parallel.islands > 1 && o.group_size > c.parallel.islands)
    problems.push_back("config: outer.group_size = " + std::to_string(o.group_size) +
                       " exceeds parallel.islands = " + std::to_string(c.parallel.islands) +
                       "; use a group size of at most the island count");
}

// The kernel levers that depend on another setting: an explicit true the config alone rules out.
// (What also needs the device -- a partner left at auto, off on the CPU -- parallelize's
// resolve_kernels refuses.) auto resolves quietly to off in each case.
void validate_kernels(const Config& c, Problems& problems) {
  const KernelsConfig& k = c.kernels;
  const int zero = c.parallel.zero;
  if (k.first_grad_copy == KernelChoice::kOn && zero >= 2)
    problems.push_back(
        "config: kernels.first_grad_copy = true cannot apply at parallel.zero = " + std::to_string(zero) +
        " (the first gradient copy lands in the ZeRO-0/1 flat buffer); set it to auto or "
        "false, or parallel.zero to 0 or 1");
  if (k.fused_weight_grad == KernelChoice::kOn && zero >= 2)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply at parallel.zero = " + std::to_string(zero) +
        " (the weight gradients are written into the ZeRO-0/1 flat buffer, with "
        "kernels.first_grad_copy); set it to auto or false, or parallel.zero to 0 or 1");
  else if (k.fused_weight_grad == KernelChoice::kOn && k.first_grad_copy == KernelChoice::kOff)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply with kernels.first_grad_copy = false (the "
        "weight gradients are written into the buffer the first gradient copy fills); set "
        "kernels.first_grad_copy: true, or kernels.fused_weight_grad to auto or false");
  if (k.fused_clip == KernelChoice::kOn && k.fused_adamw == KernelChoice::kOff)
    problems.push_back(
        "config: kernels.fused_clip = true cannot apply with kernels.fused_adamw = false (clipping's "
        "scale is applied inside the fused AdamW kernel); set kernels.fused_adamw: true, or "
        "kernels.fused_clip to auto or false");
}

}  // namespace

std::vector<std::string> validate_layout(const Config& c, int world_size) {
  Problems problems;
  const ParallelConfig& p = c.parallel;
  const ModelConfig& m = c.model;
  const int64_t layout = c.job_ranks();
  const std::string product = c.islands_are_jobs() ? "pp*dp*tp (one island per job)" : "islands*pp*dp*tp";
  if (layout != world_size)
    problems.push_back("parallel: " + product + " = " + std::to_string(layout) + " but " +
                       std::to_string(world_size) + " ranks were launched; launch " + std::to_string(layout) +
                       " ranks (atoll launch does this) or change the layout");

  // The global batch is the whole job's: every island takes its share of every step's sequences.
  const int64_t split = int64_t{p.islands} * p.dp * p.microbatches;
  require_divisible(problems, "train.global_batch", c.train.global_batch,
                    "parallel.islands*parallel.dp*parallel.microbatches", split,
                    "use a multiple of " + std::to_string(split));
  validate_outer(c, problems);
  validate_kernels(c, problems);
  if (c.train.profile_start > 0 && int64_t{c.train.profile_start} + c.train.profile_steps - 1 > c.train.steps)
    problems.push_back("config: train.profile_start = " + std::to_string(c.train.profile_start) + " with " +
                       "train.profile_steps = " + std::to_string(c.train.profile_steps) + " ends after " +
                       "train.steps = " + std::to_string(c.train.steps) +
                       "; profile steps of the run (or set profile_start to 0)");

  require_divisible(problems, "model.dim", m.dim, "model.heads", m.heads,
                    "each head gets dim/heads channels, so pick heads that divide dim");
  if (m.heads > 0 && m.dim % m.heads == 0 && (m.dim / m.heads) % 2 != 0)
    problems.push_back("config: model.dim / model.heads = " + std::to_string(m.dim / m.heads) +
                       " is odd; RoPE rotates channel pairs, so change dim or heads for an even head size");
  require_divisible(problems, "model.heads", m.heads, "model.kv_heads", m.kv_heads,
                    "kv_heads must divide heads (each kv head serves heads/kv_heads query heads)");

  // Tensor parallelism splits heads, kv heads and the MLP width (and with SP the sequence) over tp.
  const std::string tp_fix = "tensor parallelism splits it evenly, so pick a tp that divides it";
  require_divisible(problems, "model.heads", m.heads, "parallel.tp", p.tp, tp_fix);
  require_divisible(problems, "model.kv_heads", m.kv_heads, "parallel.tp", p.tp, tp_fix);
  require_divisible(problems, "model.ffn", m.ffn, "parallel.tp", p.tp, tp_fix);
  if (p.sequence_parallel)
    require_divisible(problems, "model.seq", m.seq, "parallel.tp", p.tp,
                      "sequence parallelism splits the sequence evenly, so pick a tp that divides it");

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
  return problems;
}

std::string config_table(const Config& config) {
  size_t name_width = std::string("setting").size(), value_width = std::string("value").size();
  for (const Field& f : fields()) {
    name_width = std::max(name_width, f.name().size());
    value_width = std::max(value_width, f.show(config).size());
  }
  const auto row = [&](const std::string& name, const std::string& value) {
    return "| " + name + std::string(name_width - name.size(), ' ') + " | " + value +
           std::string(value_width - value.size(), ' ') + " |\n";
  };
  const std::string rule =
      "+" + std::string(name_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+\n";
  std::string table = rule + row("setting", "value") + rule;
  for (const Field& f : fields()) table += row(f.name(), f.show(config));
  return table + rule;
}

std::vector<ConfigKeyReference> config_reference() {
  std::vector<ConfigKeyReference> keys;
  for (const Field& f : fields()) keys.push_back(f.reference);
  return keys;
}

std::string config_to_yaml(const Config& config) {
  std::string yaml;
  for (const std::string& section : section_names()) {
    yaml += section + ":\n";
    for (const Field& f : fields())
      if (f.section == section) yaml += "  " + f.key + ": " + f.show(config) + "\n";
  }
  return yaml;
}

std::string island_shared_settings(const Config& config) {
  static const std::set<std::string> own = {
      "outer.rendezvous",          "outer.island",  "outer.secret_file",
      "outer.timeout_s",           "outer.grace_s", "outer.simulated_bandwidth_mbps",
      "outer.simulated_latency_ms"};
  static const std::set<std::string> shared = {"parallel.islands", "run.seed", "train.steps",
                                               "train.global_batch"};
  std::string text;
  for (const Field& f : fields()) {
    // Islands that exchange rank by rank must also share one layout (canonically, each its own).
    const bool layout = f.section == "parallel" && !config.islands_meet_canonically();
    const bool whole_section =
        (f.section == "model" || f.section == "outer" || layout) && !own.count(f.name());
    if (whole_section || shared.count(f.name())) text += f.name() + ": " + f.show(config) + "\n";
  }
  return text;
}

}  // namespace atl::runtime
