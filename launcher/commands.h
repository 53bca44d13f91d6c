// The `atoll` command's subcommands. Each takes the arguments after its own name and returns the
// process exit code.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace atl::launcher {

using Args = std::vector<std::string>;

int train_command(int argc, char** argv);  // needs argc/argv for MPI_Init
int launch_command(const Args& args);
int data_command(const Args& args);
int plan_command(const Args& args);
int config_command(const Args& args);
int version_command();
int ckpt_command(const Args& args);
int report_command(const Args& args);
int rendezvous_command(const Args& args);
int tokenizer_command(const Args& args);
int eval_command(const Args& args);
int sample_command(const Args& args);

// CONFIG [--set k=v]... parsed; everything else is left in `rest`.
struct ConfigArgs {
  std::string config_path;
  std::vector<std::string> overrides;
  Args rest;
};
// Throws std::invalid_argument with a usage hint on malformed arguments.
ConfigArgs parse_config_args(const Args& args, const std::string& usage);

bool wants_help(const Args& args);
// `value` of `option` as an integer >= 0, or std::invalid_argument ("--np abc is not a non-negative
// integer; e.g. --np 2").
int non_negative(const std::string& option, const std::string& value);

// `--name value` options (each name in `known`; a repeated one keeps the last value) and positional
// arguments, from args[first] on. std::invalid_argument with `usage` for an unknown option or one
// without a value.
struct Options {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
  bool has(const std::string& name) const { return values.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  // The option's number (fallback when absent); std::invalid_argument "--name X is not a number".
  int64_t integer(const std::string& name, int64_t fallback) const;
  double real(const std::string& name, double fallback) const;
};
Options parse_options(const Args& args, size_t first, const std::set<std::string>& known,
                      const std::string& usage);

}  // namespace atl::launcher
