// The `atoll` command's subcommands. Each takes the arguments after its own name and returns the
// process exit code.
#pragma once

#include <string>
#include <vector>

namespace atl::launcher {

using Args = std::vector<std::string>;

int train_command(int argc, char** argv);  // needs argc/argv for MPI_Init
int launch_command(const Args& args);
int supervise_command(const Args& args);  // internal: one rank under `atoll launch`
int data_command(const Args& args);
int plan_command(const Args& args);
int ckpt_command(const Args& args);
int report_command(const Args& args);
int rendezvous_command(const Args& args);

// CONFIG [--set k=v]... parsed; everything else is left in `rest`.
struct ConfigArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  Args rest;
};
// Throws std::invalid_argument with a usage hint on malformed arguments.
ConfigArgs parse_config_args(const Args& args, const std::string& usage);

bool wants_help(const Args& args);

}  // namespace atl::launcher
