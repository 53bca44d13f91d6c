// The train section: its rows of the field table, the rule on the profiled steps and FP8's rules on
// the shapes its products take.
#include <utility>

#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> train_fields() {
  const SectionFields<TrainConfig> train{"train", &Config::train};
  return {
      train("steps", &TrainConfig::steps, "Optimizer steps of the run (the schedule's length).", at_least(1)),
      train("global_batch", &TrainConfig::global_batch,
            "Sequences per step over the whole job; a multiple of islands*dp*microbatches.", at_least(1)),
      train("log_every", &TrainConfig::log_every, "Steps between progress lines.", at_least(1)),
      train("eval_every", &TrainConfig::eval_every,
            "Steps between validation losses (and one at the end); 0: never.", at_least(0)),
      train("eval_sequences", &TrainConfig::eval_sequences, "Validation sequences per evaluation.",
            at_least(0)),
      train("sample_every", &TrainConfig::sample_every, "Steps between text samples rank 0 prints; 0: never.",
            at_least(0)),
      train("sample_prompt", &TrainConfig::sample_prompt, "The text the samples continue."),
      train("sample_tokens", &TrainConfig::sample_tokens, "Tokens per sample.", at_least(1)),
      train("profile_start", &TrainConfig::profile_start,
            "First step of a Kineto trace in run.dir/profile (every rank's, and rank 0's time by "
            "kernel); 0: none.",
            at_least(0)),
      train("profile_steps", &TrainConfig::profile_steps, "Steps the trace covers from train.profile_start.",
            at_least(1)),
      train("precision", &TrainConfig::precision,
            "bf16: bf16 compute with fp32 gradients, master weights and optimizer state; fp8: as bf16, "
            "with the decoder layers' linear products (forward and both gradients) in FP8 on a GPU of "
            "compute capability 8.9+ (rowwise scaling 9.0+)."),
      train("fp8_scaling", &TrainConfig::fp8_scaling,
            "FP8 scales from each tensor's own maximum: one per tensor (gradients E5M2), or one per row "
            "of each product's operands (gradients E4M3); under train.precision fp8."),
      train("on_nonfinite", &TrainConfig::on_nonfinite,
            "A NaN/Inf loss or gradient norm: skip the step's update, or stop (checkpoint, exit 3)."),
      train("recompute", &TrainConfig::recompute,
            "Activation recomputation: selective reruns norms, RoPE and SwiGLU; full reruns each layer."),
  };
}

namespace {

// FP8's products run through cuBLASLt, whose FP8 kernels take dimensions in multiples of 16: each
// decoder linear layer's input and output widths on a tp rank, and (the weight gradient sums over
// them) the tokens of a training microbatch. Checked where the split itself is valid (else that
// problem is reported).
void validate_fp8(const Config& c, Problems& problems) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  if (m.heads < 1 || p.tp < 1 || m.dim % m.heads != 0 || m.ffn % p.tp != 0 || m.kv_heads % p.tp != 0 ||
      m.heads % p.tp != 0)
    return;
  const int64_t head_dim = m.dim / m.heads;
  const std::vector<std::pair<std::string, int64_t>> widths = {
      {"model.dim", m.dim},
      {"model.dim / parallel.tp", m.dim / p.tp},
      {"model.kv_heads * head size / parallel.tp", m.kv_heads * head_dim / p.tp},
      {"model.ffn / parallel.tp", m.ffn / p.tp}};
  for (const auto& [name, width] : widths)
    if (width % 16 != 0)
      problems.push_back(
          "config: train.precision = fp8 needs every decoder linear layer's widths on a tp "
          "rank to be multiples of 16 (cuBLASLt's FP8 products); " +
          name + " = " + std::to_string(width) + " is not; change the model's shape or " +
          "parallel.tp, or set train.precision: bf16");
  const int64_t split = int64_t{p.islands} * p.dp * p.microbatches;
  if (split < 1 || c.train.global_batch % split != 0) return;
  const int64_t tokens = c.train.global_batch / split * m.seq;
  if (tokens % 16 != 0)
    problems.push_back(
        "config: train.precision = fp8 needs a microbatch's tokens (train.global_batch / "
        "(parallel.islands*parallel.dp*parallel.microbatches) * model.seq = " +
        std::to_string(tokens) +
        ") to be a multiple of 16 (the FP8 weight-gradient product sums over them); change "
        "model.seq or the batch split, or set train.precision: bf16");
}

}  // namespace

void validate_train(const Config& c, Problems& problems) {
  if (c.train.precision == Precision::kFp8) validate_fp8(c, problems);
  if (c.train.profile_start > 0 && int64_t{c.train.profile_start} + c.train.profile_steps - 1 > c.train.steps)
    problems.push_back("config: train.profile_start = " + std::to_string(c.train.profile_start) + " with " +
                       "train.profile_steps = " + std::to_string(c.train.profile_steps) + " ends after " +
                       "train.steps = " + std::to_string(c.train.steps) +
                       "; profile steps of the run (or set profile_start to 0)");
}

}  // namespace atl::runtime::config_detail
