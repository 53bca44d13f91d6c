// `atoll plan CONFIG [--np N] [--set k=v]...`: prints what the layout costs per rank and per group
// before anything runs (runtime/plan.h); no MPI, so it works for any layout size on any machine.
#include <iostream>

#include "launcher/commands.h"
#include "launcher/job_launch.h"
#include "launcher/plan.h"
#include "launcher/plan_data.h"
#include "runtime/config/config.h"

namespace atl::launcher {
namespace {
constexpr const char* kPlanUsage = "atoll plan CONFIG [--np N] [--set key=value]...";
}  // namespace

int plan_command(const Args& args) {
  if (wants_help(args)) {
    std::cout
        << "usage: " << kPlanUsage << "\n\nPrints per pipeline stage the bytes of parameters, gradients, "
        << "optimizer state and activations one rank holds, and the bytes each group sends per step;\n"
        << "then the training datasets (shards, tokens, weight, epochs at train.steps) where they open.\n"
        << "--np N checks the layout against N ranks first.\n";
    return 0;
  }
  const ConfigArgs parsed = parse_config_args(args, kPlanUsage);
  const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
  for (size_t i = 0; i < parsed.rest.size(); ++i) {
    if (parsed.rest[i] != "--np" || i + 1 >= parsed.rest.size())
      throw std::invalid_argument("unknown option '" + parsed.rest[i] + "'; usage: " + kPlanUsage);
    const int np = non_negative("--np", parsed.rest[++i]);
    if (const std::string mismatch = rank_count_mismatch(config, np); !mismatch.empty())
      throw std::invalid_argument(mismatch);
  }
  std::cout << format_plan(config, make_plan(config)) << format_data_plan(config);
  return 0;
}

}  // namespace atl::launcher
