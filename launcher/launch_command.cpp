// `atoll launch CONFIG [--np N] [--set k=v]... [-- MPIRUN_ARGS]`: computes the rank count from the
// layout and replaces itself with `mpirun ... atoll train CONFIG ...`.
#include <unistd.h>

#include <iostream>
#include <thread>

#include "launcher/commands.h"
#include "runtime/config.h"

namespace atl::launcher {

namespace {
constexpr const char* kLaunchUsage = "atoll launch CONFIG [--np N] [--set key=value]... [-- MPIRUN_ARGS]";

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot locate the atoll executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}
}  // namespace

int launch_command(const Args& args) {
  if (wants_help(args)) {
    std::cout
        << "usage: " << kLaunchUsage << "\n\nStarts mpirun with islands*pp*dp*tp ranks (or --np N), adding "
        << "--allow-run-as-root when run as root and --oversubscribe when there are more ranks than cores.\n"
        << "Arguments after -- go to mpirun unchanged.\n";
    return 0;
  }
  ConfigArgs parsed = parse_config_args(args, kLaunchUsage);
  const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
  const runtime::ParallelConfig& p = config.parallel;
  int np = p.islands * p.pp * p.dp * p.tp;
  std::vector<std::string> mpirun_extra;
  for (size_t i = 0; i < parsed.rest.size(); ++i) {
    const std::string& a = parsed.rest[i];
    if (a == "--np" && i + 1 < parsed.rest.size()) {
      np = std::stoi(parsed.rest[++i]);
    } else if (a == "--") {
      mpirun_extra.assign(parsed.rest.begin() + static_cast<long>(i) + 1, parsed.rest.end());
      break;
    } else {
      throw std::invalid_argument("unknown option '" + a + "'; usage: " + kLaunchUsage);
    }
  }

  std::vector<std::string> command = {"mpirun", "-np", std::to_string(np)};
  if (geteuid() == 0) command.push_back("--allow-run-as-root");
  if (np > static_cast<int>(std::thread::hardware_concurrency())) {
    command.push_back("--oversubscribe");
    command.push_back("--bind-to");
    command.push_back("none");
  }
  command.insert(command.end(), mpirun_extra.begin(), mpirun_extra.end());
  command.push_back(self_executable());
  command.push_back("train");
  command.push_back(parsed.config_path);
  for (const std::string& o : parsed.overrides) {
    command.push_back("--set");
    command.push_back(o);
  }
  std::string shown;
  for (const std::string& c : command) shown += (shown.empty() ? "" : " ") + c;
  std::cout << "atoll launch: " << shown << std::endl;

  std::vector<char*> argv;
  for (std::string& c : command) argv.push_back(c.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw std::runtime_error("cannot run mpirun (" + std::string(std::strerror(errno)) +
                           "); install Open MPI (scripts/install-deps.sh) or put mpirun on PATH");
}

}  // namespace atl::launcher
