// The train section: its rows of the field table and the rule on the profiled steps.
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
            "bf16: bf16 compute with fp32 gradients, master weights and optimizer state."),
      train("on_nonfinite", &TrainConfig::on_nonfinite,
            "A NaN/Inf loss or gradient norm: skip the step's update, or stop (checkpoint, exit 3)."),
      train("recompute", &TrainConfig::recompute,
            "Activation recomputation: selective reruns norms, RoPE and SwiGLU; full reruns each layer."),
  };
}

void validate_train(const Config& c, Problems& problems) {
  if (c.train.profile_start > 0 && int64_t{c.train.profile_start} + c.train.profile_steps - 1 > c.train.steps)
    problems.push_back("config: train.profile_start = " + std::to_string(c.train.profile_start) + " with " +
                       "train.profile_steps = " + std::to_string(c.train.profile_steps) + " ends after " +
                       "train.steps = " + std::to_string(c.train.steps) +
                       "; profile steps of the run (or set profile_start to 0)");
}

}  // namespace atl::runtime::config_detail
