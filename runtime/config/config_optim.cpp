// The optim section: its rows of the field table and the rule between its learning rates, the one check
// across fields that needs no layout (parse_config makes it).
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

namespace {

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

}  // namespace

std::vector<Field> optim_fields() {
  const SectionFields<OptimConfig> optim{"optim", &Config::optim};
  return {
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
  };
}

void check_learning_rates(const Config& config, const std::set<std::string>& rejected, Problems& problems) {
  // Made only when both values are valid.
  if (!rejected.count("optim.lr") && !rejected.count("optim.min_lr") && config.optim.min_lr > config.optim.lr)
    problems.push_back("config: optim.min_lr = " + shortest(config.optim.min_lr) +
                       " exceeds optim.lr = " + shortest(config.optim.lr) +
                       "; set optim.min_lr <= optim.lr (the schedule decays from lr down to min_lr)");
}

}  // namespace atl::runtime::config_detail
