// `atoll train CONFIG [--set k=v]...`: what each rank runs.
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "checkpoint/checkpoint_store.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_runtime.h"
#include "launcher/commands.h"
#include "runtime/config/config.h"
#include "runtime/fault_hooks.h"
#include "runtime/process_exit.h"
#include "runtime/startup.h"
#include "runtime/trainer.h"

namespace atl::launcher {

namespace {

constexpr const char* kTrainUsage = "atoll train CONFIG [--set key=value]... [--verbose]";

// What this rank takes from its process environment, read here once and handed to the trainer.
runtime::LaunchEnvironment read_launch_environment() {
  const auto value = [](const char* name) {
    const char* text = std::getenv(name);
    return std::string(text ? text : "");
  };
  runtime::LaunchEnvironment environment;
  environment.progress_bar = value("ATOLL_PROGRESS") == "bar";
  environment.placement =
      runtime::placement_from_environment([](const char* name) { return std::getenv(name); });
  environment.fault = value("ATOLL_FAULT");
  environment.checkpoint_fault = value("ATOLL_CHECKPOINT_FAULT");
  environment.checkpoint_copy_delay_ms = value("ATOLL_CHECKPOINT_COPY_DELAY_MS");
  environment.fp8_emulation = value("ATOLL_FP8_EMULATION");
  return environment;
}

}  // namespace

int train_command(int argc, char** argv) {
  const Args args(argv + 1, argv + argc);
  if (wants_help(args)) {
    std::cout << "usage: " << kTrainUsage
              << "\n\nRuns one rank of a training job; start it under mpirun/srun "
              << "(or use `atoll launch`).\nEvery rank must get the same CONFIG and overrides.\n";
    return 0;
  }
  comm::MpiRuntime mpi(&argc, &argv);
  std::unique_ptr<comm::MpiCommunicator> world = mpi.world();
  const bool is_rank0 = world->rank() == 0;
  try {
    const ConfigArgs parsed = parse_config_args(args, kTrainUsage);
    const bool verbose = parsed.rest.size() == 1 && parsed.rest[0] == "--verbose";
    if (!parsed.rest.empty() && !verbose)
      throw std::invalid_argument("unknown option '" + parsed.rest[0] + "'; usage: " + kTrainUsage);
    const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
    runtime::LaunchEnvironment environment = read_launch_environment();
    environment.verbose = verbose;
    runtime::Trainer trainer(config, *world, &std::cout, environment);
    // The failure tests' rank deaf to SIGTERM, over the preemption handler the trainer installed.
    if (runtime::FaultHooks::parse(environment.fault).ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
    trainer.run();
  } catch (const runtime::PeerFailure&) {
    return runtime::kExitBadInput;  // the failing rank has said why
  } catch (const runtime::ConfigError& e) {
    // Config problems are identical on every rank: say them once.
    if (is_rank0) std::cerr << "atoll: " << e.what() << "\n";
    return runtime::kExitBadInput;
  } catch (const runtime::AgreedStartupError& e) {
    // The same finding on every rank (the device kind the ranks chose): say it once.
    if (is_rank0) std::cerr << "atoll: " << e.what() << "\n";
    return runtime::kExitBadInput;
  } catch (const checkpoint::CheckpointError& e) {
    // Agreed over every rank before it is thrown: say it once.
    if (is_rank0) std::cerr << "atoll: " << e.what() << "\n";
    return runtime::kExitBadInput;
  } catch (const runtime::NonFiniteStop& e) {
    if (is_rank0) std::cerr << "atoll: " << e.what() << "\n";
    return runtime::kExitNonFinite;
  } catch (const std::exception& e) {
    // This rank's own problem: say it, with the rank. Start-up checks and bad arguments are input
    // the user must fix (no restart helps); anything else is a runtime failure.
    std::cerr << "atoll: error" << (world->size() > 1 ? " on rank " + std::to_string(world->rank()) : "")
              << ": " << e.what() << "\n";
    const bool bad_input =
        dynamic_cast<const runtime::StartupError*>(&e) || dynamic_cast<const std::invalid_argument*>(&e);
    return bad_input ? runtime::kExitBadInput : runtime::kExitFailure;
  }
  return runtime::kExitOk;
}

}  // namespace atl::launcher
