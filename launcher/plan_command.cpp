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
constexpr const char* kPlanUsage = "atoll plan CONFIG [--np N] [--memory GIB] [--set key=value]...";
}  // namespace

int plan_command(const Args& args) {
  if (wants_help(args)) {
    std::cout
        << "usage: " << kPlanUsage << "\n\nPrints per pipeline stage the bytes of parameters, gradients, "
        << "optimizer state and activations one rank holds, and the bytes each group sends per step;\n"
        << "then the training datasets (shards, tokens, weight, epochs at train.steps) where they open.\n"
        << "--np N checks the layout against N ranks first. --memory GIB (a device's memory, e.g. 80) says\n"
        << "whether the fullest rank fits it and, if not, the smallest parallel.cp that would.\n";
    return 0;
  }
  const ConfigArgs parsed = parse_config_args(args, kPlanUsage);
  const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
  const Options options = parse_options(parsed.rest, 0, {"--np", "--memory"}, kPlanUsage);
  if (!options.positional.empty())
    throw std::invalid_argument("unknown argument '" + options.positional[0] + "'; usage: " + kPlanUsage);
  if (options.has("--np")) {
    const int np = non_negative("--np", options.get("--np", ""));
    if (const std::string mismatch = rank_count_mismatch(config, np); !mismatch.empty())
      throw std::invalid_argument(mismatch);
  }
  const double memory_gib = options.real("--memory", 0.0);
  if (options.has("--memory") && !(memory_gib > 0))
    throw std::invalid_argument("--memory " + options.get("--memory", "") +
                                ": a device's memory in GiB must be a positive number; e.g. --memory 80");
  const Plan plan = make_plan(config);
  std::cout << format_plan(config, plan);
  if (memory_gib > 0) std::cout << format_fit(config, plan, memory_gib * 1024.0 * 1024.0 * 1024.0);
  std::cout << format_data_plan(config);
  return 0;
}

}  // namespace atl::launcher
