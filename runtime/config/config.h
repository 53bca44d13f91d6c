// Experiment configuration (DESIGN §9): one YAML file with typed sections, `--set section.key=value`
// overrides, and validation that reports every problem, one line each, naming the field, the value
// and the fix.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/lr_schedule.h"
#include "optim/outer/codec.h"
#include "optim/outer/outer_options.h"
#include "parallel/pipeline/schedule.h"
#include "runtime/config/choices.h"
#include "runtime/data/dataset_source.h"

namespace atl::runtime {

// ---- The enum-like fields, each with its YAML spellings (choices.h) ---------------------------------

// train.precision.
enum class Precision { kFp32, kBf16, kFp8 };
template <>
struct Choices<Precision> {
  static constexpr std::array<Choice<Precision>, 3> list{
      {{Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp8, "fp8"}}};
};
// The dtype parameters and activations are held in: fp8 runs the decoder layers' linear products
// in FP8 (runtime/model/fp8_linear.h) and everything else in bf16.
constexpr Precision storage_precision(Precision precision) {
  return precision == Precision::kFp8 ? Precision::kBf16 : precision;
}
// Bytes of one element held in `precision`.
constexpr int element_bytes(Precision precision) {
  return storage_precision(precision) == Precision::kBf16 ? 2 : 4;
}

// parallel.reduce_dtype: the dtype gradients travel and are summed in over dp (fp8 is a compute
// precision only: a sum in FP8 would lose the gradients' small parts).
enum class ReduceDtype { kFp32, kBf16 };
template <>
struct Choices<ReduceDtype> {
  static constexpr std::array<Choice<ReduceDtype>, 2> list{
      {{ReduceDtype::kFp32, "fp32"}, {ReduceDtype::kBf16, "bf16"}}};
};
constexpr int element_bytes(ReduceDtype dtype) {
  return dtype == ReduceDtype::kBf16 ? 2 : 4;
}

// train.fp8_scaling: one FP8 scale per tensor, or per row of each product's operands
// (runtime/model/fp8_tensor.h).
enum class Fp8Scaling { kTensorwise, kRowwise };
template <>
struct Choices<Fp8Scaling> {
  static constexpr std::array<Choice<Fp8Scaling>, 2> list{
      {{Fp8Scaling::kTensorwise, "tensorwise"}, {Fp8Scaling::kRowwise, "rowwise"}}};
};

using PipelineSchedule = parallel::pipeline::ScheduleKind;
template <>
struct Choices<PipelineSchedule> {
  static constexpr std::array<Choice<PipelineSchedule>, 3> list{
      {{PipelineSchedule::kGPipe, "gpipe"},
       {PipelineSchedule::kOneFOneB, "1f1b"},
       {PipelineSchedule::kInterleaved, "interleaved"}}};
};

// train.on_nonfinite.
enum class NonFiniteAction { kSkip, kStop };
template <>
struct Choices<NonFiniteAction> {
  static constexpr std::array<Choice<NonFiniteAction>, 2> list{
      {{NonFiniteAction::kSkip, "skip"}, {NonFiniteAction::kStop, "stop"}}};
};

// train.recompute: which activations a decoder layer keeps for its backward (docs/design.md,
// "Activation recomputation").
enum class Recompute { kNone, kSelective, kFull };
template <>
struct Choices<Recompute> {
  static constexpr std::array<Choice<Recompute>, 3> list{
      {{Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}}};
};

template <>
struct Choices<optim::LrDecay> {
  static constexpr std::array<Choice<optim::LrDecay>, 3> list{{{optim::LrDecay::kCosine, "cosine"},
                                                               {optim::LrDecay::kConstant, "constant"},
                                                               {optim::LrDecay::kWsd, "wsd"}}};
};

// checkpoint.mode.
enum class CheckpointMode { kSync, kAsync, kAsyncLazy };
template <>
struct Choices<CheckpointMode> {
  static constexpr std::array<Choice<CheckpointMode>, 3> list{{{CheckpointMode::kSync, "sync"},
                                                               {CheckpointMode::kAsync, "async"},
                                                               {CheckpointMode::kAsyncLazy, "async_lazy"}}};
};

// outer.algorithm: the outer optimizer's own enum (optim/outer/outer_options.h).
using OuterAlgorithm = optim::outer::Algorithm;
template <>
struct Choices<OuterAlgorithm> {
  static constexpr std::array<Choice<OuterAlgorithm>, 4> list{
      {{OuterAlgorithm::kNone, "none"},
       {OuterAlgorithm::kDiLoCo, "diloco"},
       {OuterAlgorithm::kStreamingDiLoCo, "streaming_diloco"},
       {OuterAlgorithm::kNoLoCo, "noloco"}}};
};

// outer.compression: the codecs' own names (optim/outer/codec.h).
template <>
struct Choices<optim::outer::Codec> {
  using Codec = optim::outer::Codec;
  static constexpr std::array<Choice<Codec>, 5> list{
      {{Codec::kNone, optim::outer::codec_name(Codec::kNone)},
       {Codec::kFp16, optim::outer::codec_name(Codec::kFp16)},
       {Codec::kBf16, optim::outer::codec_name(Codec::kBf16)},
       {Codec::kInt8, optim::outer::codec_name(Codec::kInt8)},
       {Codec::kInt4, optim::outer::codec_name(Codec::kInt4)}}};
};

// run.device.
enum class DeviceKind { kAuto, kCpu, kCuda };
template <>
struct Choices<DeviceKind> {
  static constexpr std::array<Choice<DeviceKind>, 3> list{
      {{DeviceKind::kAuto, "auto"}, {DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}}};
};

// A kernel lever of the kernels section: on, off, or auto (on a GPU, off on the CPU, whose results
// then stay bit for bit what they were).
enum class KernelChoice { kAuto, kOn, kOff };
template <>
struct Choices<KernelChoice> {
  static constexpr std::array<Choice<KernelChoice>, 3> list{
      {{KernelChoice::kAuto, "auto"}, {KernelChoice::kOn, "true"}, {KernelChoice::kOff, "false"}}};
};
// kernels.attention.
enum class AttentionKernel { kAuto, kFlash, kCudnn, kEfficient };
template <>
struct Choices<AttentionKernel> {
  static constexpr std::array<Choice<AttentionKernel>, 4> list{{{AttentionKernel::kAuto, "auto"},
                                                                {AttentionKernel::kFlash, "flash"},
                                                                {AttentionKernel::kCudnn, "cudnn"},
                                                                {AttentionKernel::kEfficient, "efficient"}}};
};
// Whether `choice` is on for a run on `cuda` (a GPU) or not.
inline bool kernel_on(KernelChoice choice, bool cuda) {
  return choice == KernelChoice::kOn || (choice == KernelChoice::kAuto && cuda);
}

// ---- The sections --------------------------------------------------------------------------------
//
// Each field's meaning is its line in the field table (config.cpp), which `atoll config reference`
// and docs/configuration.md print; the comments here say only what the table does not.

struct RunConfig {
  std::string dir = "runs/default";
  int64_t seed = 1234;
  int threads = 0;
  DeviceKind device = DeviceKind::kAuto;
  bool share_gpu = false;
  bool deterministic = false;
  double mfu_peak_tflops = 0.0;
};

struct ModelConfig {
  int vocab = 256;
  int dim = 256;
  int layers = 4;
  int heads = 8;
  int kv_heads = 8;
  int ffn = 688;
  int seq = 256;
  bool tie_embeddings = false;
  bool document_mask = false;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  double init_std = 0.02;
  std::string init_from = kNoInitialWeights;
  static constexpr const char* kNoInitialWeights = "none";
  bool starts_from_file() const { return init_from != kNoInitialWeights; }
};

struct ParallelConfig {
  int islands = 1;
  int pp = 1;
  int dp = 1;
  int tp = 1;
  int cp = 1;
  int zero = 0;
  int microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int virtual_stages = 1;
  double bucket_mb = 25.0;
  ReduceDtype reduce_dtype = ReduceDtype::kFp32;
  bool sequence_parallel = false;
  std::vector<int> stage_layers;  // empty: an even split

  // Model chunks each pipeline rank runs: virtual_stages under interleaved 1F1B with pp >= 2, else 1.
  int chunks_per_stage() const {
    return schedule == PipelineSchedule::kInterleaved && pp > 1 ? virtual_stages : 1;
  }
};

struct TrainConfig {
  int steps = 200;
  int global_batch = 16;
  int log_every = 10;
  int eval_every = 50;
  int eval_sequences = 32;
  // Samples are drawn at temperature 1 with top-k 40, seeded by run.seed and the step (as llm.c's).
  int sample_every = 0;
  std::string sample_prompt = "The ";
  int sample_tokens = 64;
  Precision precision = Precision::kFp32;
  Fp8Scaling fp8_scaling = Fp8Scaling::kTensorwise;
  NonFiniteAction on_nonfinite = NonFiniteAction::kStop;
  Recompute recompute = Recompute::kNone;
  int profile_start = 0;
  int profile_steps = 3;
};

struct OptimConfig {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int warmup = 20;
  double beta1 = 0.9;  // YAML: betas: [beta1, beta2]
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  optim::LrDecay schedule = optim::LrDecay::kCosine;
};

// Faster kernels for the same model and update, each a lever measured against its baseline
// (bench/bench_gpu.sh). Each rounds differently from the composed operations it replaces.
struct KernelsConfig {
  KernelChoice fused_adamw = KernelChoice::kAuto;
  KernelChoice fused_clip = KernelChoice::kAuto;
  KernelChoice first_grad_copy = KernelChoice::kAuto;
  KernelChoice fused_weight_grad = KernelChoice::kAuto;
  KernelChoice fused_rms_norm = KernelChoice::kAuto;
  KernelChoice native_gqa = KernelChoice::kAuto;
  KernelChoice fused_swiglu = KernelChoice::kAuto;
  KernelChoice fused_rope = KernelChoice::kAuto;
  KernelChoice fused_cross_entropy = KernelChoice::kAuto;
  AttentionKernel attention = AttentionKernel::kAuto;
};

struct DataConfig {
  DatasetList train = one_dataset("data/pydocs/train.bin");
  DatasetList val = one_dataset("data/pydocs/val.bin");
  // atoll data prepare --tokenizer copies a SentencePiece model to DIR/tokenizer.model;
  // checkpoints carry it.
  std::string tokenizer = "bytes";
};

// Checkpointing (DESIGN §7).
struct CheckpointConfig {
  std::string dir = kDirInRun;
  static constexpr const char* kDirInRun = "auto";
  int every = 0;
  int keep = 3;
  int keep_every = 0;
  CheckpointMode mode = CheckpointMode::kSync;
  std::string resume = kResumeNewest;
  static constexpr const char* kResumeNewest = "auto";
  static constexpr const char* kResumeNone = "none";
  bool resumes_newest() const { return resume == kResumeNewest; }
  bool resumes() const { return resume != kResumeNone; }
};

// Islands (DESIGN §6): the outer optimizer's options, which a run hands to it as they are (its
// algorithm, H, lr, momentum, nesterov, fragments, delay, mix, group_size, gamma, delayed,
// compression and topk, with their defaults: optim/outer/outer_options.h), and what else the
// islands need: the pseudo-gradient bound, the simulated link, and islands as separate jobs.
struct OuterConfig : optim::outer::OuterOptions {
  double max_pseudo_grad_norm = 0.0;
  double simulated_bandwidth_mbps = 0.0;
  double simulated_latency_ms = 0.0;
  std::string rendezvous = kNoRendezvous;
  static constexpr const char* kNoRendezvous = "none";
  int island = -1;  // not given
  double timeout_s = 60.0;
  double reconnect_s = 120.0;  // how long a lost rendezvous is waited for (a restart)
  std::string secret_file = kNoSecret;
  int min_islands = 0;
  double grace_s = 10.0;
  bool through_leader = false;  // islands of different layouts: rank 0 exchanges for its island
  static constexpr const char* kNoSecret = "none";
  bool has_secret() const { return secret_file != kNoSecret; }
};

// Collective health (DESIGN §3): every collective is recorded in a flight-recorder ring, and a
// watchdog aborts the job when one waits longer than timeout_s.
struct CommConfig {
  double timeout_s = 600.0;
  int flight_records = 64;
};

struct Config {
  RunConfig run;
  ModelConfig model;
  ParallelConfig parallel;
  TrainConfig train;
  OptimConfig optim;
  KernelsConfig kernels;
  DataConfig data;
  CheckpointConfig checkpoint;
  OuterConfig outer;
  CommConfig comm;

  // Whether each island is a job of its own, meeting the others over TCP (outer.rendezvous).
  bool islands_are_jobs() const { return outer.rendezvous != OuterConfig::kNoRendezvous; }
  // Island jobs whose membership is agreed per outer round (outer.min_islands < parallel.islands).
  bool islands_are_elastic() const {
    return islands_are_jobs() && outer.min_islands > 0 && outer.min_islands < parallel.islands;
  }
  // Island jobs of a fixed membership average in the canonical parameter space, rank by rank
  // (optim/outer/sliced_average.h) or through each island's rank 0 (outer.through_leader;
  // optim/outer/canonical_average.h), so their layouts may differ; elastic island
  // jobs, and islands averaging every step, exchange rank by rank and share one layout.
  bool islands_meet_canonically() const {
    return islands_are_jobs() && !islands_are_elastic() && outer.algorithm != OuterAlgorithm::kNone;
  }
  // The ranks this job launches: islands*pp*dp*tp*cp, or pp*dp*tp*cp when each island is a job.
  int job_ranks() const {
    return (islands_are_jobs() ? 1 : parallel.islands) * parallel.pp * parallel.dp * parallel.tp *
           parallel.cp;
  }

  // checkpoint.dir, or <run.dir>/checkpoints for auto.
  std::string checkpoint_dir() const {
    return checkpoint.dir == CheckpointConfig::kDirInRun ? run.dir + "/checkpoints" : checkpoint.dir;
  }
};

// Thrown for any bad config. Each problem is one line naming the field, its value, why it is wrong and
// the fix, e.g. "config: model.heads = 0 must be >= 1; set model.heads to a positive integer, e.g. 8";
// what() joins them with newlines.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::vector<std::string>& problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  ConfigError(std::vector<std::string> lines, int);  // lines already one_line'd
  std::vector<std::string> problems_;
};

// Parses YAML text, applies overrides ("section.key=value", the value parsed as YAML, e.g.
// "optim.betas=[0.9,0.99]"; a missing section is created), fills defaults, checks types and ranges.
// Throws ConfigError listing every problem: unknown sections or keys (with a did-you-mean), wrong
// types, values out of range, malformed overrides.
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {});
// Reads the file (ConfigError "config: cannot read FILE: reason; check the path"), then parse_config.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// Checks across fields, some needing the launched rank count: the layout's rank count, the batch
// split over dp*microbatches, head and tensor-parallel divisibility, the pipeline stage count.
// Returns the problems, one line each with its fix (empty: fine).
std::vector<std::string> validate_layout(const Config& config, int world_size);
// A boxed table of every resolved field (section.key | value), for the start-up banner.
std::string config_table(const Config& config);
// Every field of every section as YAML, for the run directory; parse_config of it gives back an
// equal Config.
std::string config_to_yaml(const Config& config);
// One key the parser accepts, as `atoll config reference` documents it: generated from the same
// table the parser reads, so the reference cannot drift from the code.
struct ConfigKeyReference {
  std::string section, key;
  std::string type;           // boolean | integer | number | string | choice | list
  std::string default_value;  // as YAML
  std::string allowed;        // a choice's spellings, a number's range, a list's shape ("" for any string)
  std::string meaning;        // one line
};
// Every key, in the order of the YAML contract.
std::vector<ConfigKeyReference> config_reference();
// What every island job of one run must agree on, one "name: value" line per setting: the model,
// the outer settings (not this island's own: rendezvous, island, secret, timeouts, the simulated
// link), parallel.islands, run.seed (the initial weights), train.steps (the schedule and the last
// round) and train.global_batch. Islands compare it at the rendezvous.
std::string island_shared_settings(const Config& config);

}  // namespace atl::runtime
