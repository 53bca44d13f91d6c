// `atoll-supervise [--attempt NAME] RUN_DIR -- COMMAND...`: what `atoll launch` runs as each rank. It
// runs the real rank (COMMAND, `atoll train ...`) as its child, copies the child's output to its own and to
// <run dir>/logs/rank-N.log, passes on SIGTERM/SIGUSR1, and records how the child ended in <run
// dir>/logs/rank-N.attempt-NAME.exit -- the one way to learn that a rank was killed by SIGKILL, which
// the rank itself cannot report. As the child starts it records both processes in
// rank-N.attempt-NAME.pids, for the launcher to end them if mpirun or srun does not. Both records
// carry the attempt `atoll launch` names on this command line.
//
// A program of its own, linking neither LibTorch nor MPI: a rank's supervisor only waits on its
// child, and linked into `atoll` it would cost every rank LibTorch's start-up (about half a second
// of CPU) and ~190 MB of memory.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "launcher/child_process.h"
#include "launcher/rank_records.h"
#include "runtime/process_exit.h"
#include "text/one_line.h"

namespace atl::launcher {
namespace {

using Args = std::vector<std::string>;

constexpr const char* kSuperviseUsage = "atoll-supervise [--attempt NAME] RUN_DIR -- COMMAND [ARGS]...";

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

std::string environment_value(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The Slurm job step this process runs in ("JOB.STEP"), empty outside one.
std::string slurm_step() {
  const std::string job = environment_value("SLURM_JOB_ID"), step = environment_value("SLURM_STEP_ID");
  return job.empty() || step.empty() ? "" : job + "." + step;
}

// Writes `line` to `path` whole or not at all (a reader never sees half a record).
void write_record(const std::string& path, const std::string& line) {
  std::ofstream(path + ".tmp") << line;
  std::filesystem::rename(path + ".tmp", path);
}

int supervise(const Args& args) {
  std::string attempt;
  size_t first = 0;
  if (args.size() >= 2 && args[0] == "--attempt") {
    attempt = args[1];
    if (!valid_attempt_name(attempt))
      throw std::invalid_argument(
          "--attempt '" + text::one_line(attempt) +
          "': an attempt is named with letters, digits, '.', '_' and '-'; usage: " + kSuperviseUsage);
    first = 2;
  }
  if (args.size() < first + 3 || args[first + 1] != "--")
    throw std::invalid_argument("usage: " + std::string(kSuperviseUsage));
  const std::string run_dir = args[first];
  const std::vector<std::string> command(args.begin() + static_cast<long>(first) + 2, args.end());
  const int rank = rank_from_environment();
  std::filesystem::create_directories(run_dir + "/logs");
  std::ofstream log(run_dir + "/logs/rank-" + std::to_string(rank) + ".log", std::ios::app);

  ChildOptions options;
  options.die_with_parent = true;
  options.own_process_group = true;
  options.output = [&log](int stream, const char* data, size_t size) {
    log.write(data, static_cast<std::streamsize>(size));
    log.flush();
    (void)!write(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, data, size);
  };
  options.started = [&](long pid) {
    RankProcesses processes;
    processes.rank = rank;
    processes.attempt = attempt;
    processes.host = host_name();
    processes.supervisor_pid = getpid();
    processes.supervisor_pgid = getpgrp();
    processes.supervisor_start = process_start_time(getpid());
    processes.child_pid = pid;
    processes.child_start = process_start_time(pid);
    processes.slurm_step = slurm_step();
    write_record(processes_record_path(run_dir, rank, attempt), to_line(processes));
  };
  const ChildExit child = run_child(command, options);

  RankExit record;
  record.rank = rank;
  record.host = host_name();
  record.pid = child.pid;
  record.signaled = child.signaled;
  record.code = child.code;
  record.time_s = seconds_since_epoch();
  record.attempt = attempt;
  write_record(exit_record_path(run_dir, rank, attempt), to_line(record));
  return child.status();
}

}  // namespace
}  // namespace atl::launcher

int main(int argc, char** argv) {
  try {
    return atl::launcher::supervise(atl::launcher::Args(argv + 1, argv + argc));
  } catch (const std::invalid_argument& e) {
    std::cerr << "atoll-supervise: error: " << e.what() << "\n";
    return atl::runtime::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "atoll-supervise: error: " << e.what() << "\n";
    return atl::runtime::kExitFailure;
  }
}
