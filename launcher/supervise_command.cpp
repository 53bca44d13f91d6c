// `atoll supervise RUN_DIR -- COMMAND...`: what `atoll launch` runs as each rank. It runs the real
// rank (COMMAND) as its child, copies the child's output to its own and to <run dir>/logs/rank-N.log,
// passes on SIGTERM/SIGUSR1, and records how the child ended in <run dir>/logs/rank-N.exit -- the one
// way to learn that a rank was killed by SIGKILL, which the rank itself cannot report.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "launcher/child_process.h"
#include "launcher/commands.h"
#include "launcher/job_launch.h"

namespace atl::launcher {
namespace {

constexpr const char* kSuperviseUsage = "atoll supervise RUN_DIR -- COMMAND [ARGS]...";

// This process's rank as the launcher (Open MPI, PMIx or Slurm) tells it.
int rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

std::string host_name() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

int supervise_command(const Args& args) {
  if (args.size() < 3 || args[1] != "--")
    throw std::invalid_argument("usage: " + std::string(kSuperviseUsage));
  const std::string run_dir = args[0];
  const std::vector<std::string> command(args.begin() + 2, args.end());
  const int rank = rank_from_environment();
  std::filesystem::create_directories(run_dir + "/logs");
  const std::string exit_path = exit_record_path(run_dir, rank);
  std::filesystem::remove(exit_path);
  std::ofstream log(run_dir + "/logs/rank-" + std::to_string(rank) + ".log", std::ios::app);

  ChildOptions options;
  options.die_with_parent = true;
  options.own_process_group = true;
  options.output = [&log](int stream, const char* data, size_t size) {
    log.write(data, static_cast<std::streamsize>(size));
    log.flush();
    (void)!write(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, data, size);
  };
  const ChildExit child = run_child(command, options);

  RankExit record;
  record.rank = rank;
  record.host = host_name();
  record.pid = child.pid;
  record.signaled = child.signaled;
  record.code = child.code;
  record.time_s = seconds_since_epoch();
  std::ofstream(exit_path + ".tmp") << to_line(record);
  std::filesystem::rename(exit_path + ".tmp", exit_path);
  return child.status();
}

}  // namespace atl::launcher
