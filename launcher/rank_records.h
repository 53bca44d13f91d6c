// The records each rank's supervisor (atoll-supervise) leaves in <run dir>/logs/ for `atoll launch`:
// how the rank ended (rank-N.attempt-A.exit) and its processes (rank-N.attempt-A.pids), each keyed
// by the attempt the launcher named on the supervisor's command line. No LibTorch, no config: the
// supervisor links this alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace atl::launcher {

// Whether `attempt` can name an attempt: letters, digits, '.', '_' and '-' (it becomes part of the
// records' file names and a word of their lines).
bool valid_attempt_name(const std::string& attempt);

// One rank's exit as its supervisor recorded it.
struct RankExit {
  int rank = -1;
  long pid = 0;
  std::string host;
  bool signaled = false;
  int code = 0;         // the exit code, or the signal number when signaled
  double time_s = 0.0;  // wall-clock seconds since the epoch, on the rank's host
  std::string attempt;  // the attempt it belongs to (atoll-supervise --attempt; empty: none)
  bool failed() const { return signaled || code != 0; }
  // The shell convention, as `atoll-supervise` exits: 128 + signal for a killed rank.
  int status() const { return signaled ? 128 + code : code; }
};

// Now, as RankExit::time_s counts it.
double seconds_since_epoch();
std::string to_line(const RankExit& exit);
std::optional<RankExit> rank_exit_from_line(const std::string& line);
// <run dir>/logs/rank-N.attempt-A.exit (rank-N.exit for no attempt): a file per rank and attempt,
// so that a record of an earlier attempt written late (a rank that ended late, a partitioned node's
// write reaching the shared filesystem after the relaunch) can never replace the running attempt's.
std::string exit_record_path(const std::string& run_dir, int rank, const std::string& attempt);
// Every *.exit in <run dir>/logs; unreadable records are skipped.
std::vector<RankExit> read_rank_exits(const std::string& run_dir);
// Those of `attempt` alone: files named for it whose line names it too. A record of another attempt
// says nothing of this one.
std::vector<RankExit> read_rank_exits(const std::string& run_dir, const std::string& attempt);
// The failure earliest by the records' times (which each rank's host's clock wrote); no failure,
// nothing.
std::optional<RankExit> first_failure(const std::vector<RankExit>& exits);
// "rank 2 (pid 4242 on node7) was killed by signal 9 (SIGKILL)" / "... exited with code 1".
std::string describe(const RankExit& exit);

// One rank's processes, recorded by its supervisor as the rank starts, in <run dir>/logs/rank-N.pids:
// the supervisor (the process mpirun or srun started) and the rank under it, in a process group of
// its own. With them the launcher ends what an ended mpirun or srun left behind, and makes sure no
// rank of a failed attempt is alive before it relaunches. A start time (/proc/PID/stat's starttime)
// tells a process from a later one given the same pid.
struct RankProcesses {
  int rank = -1;
  std::string attempt;  // as RankExit::attempt
  std::string host;
  long supervisor_pid = 0, supervisor_pgid = 0;
  unsigned long long supervisor_start = 0;
  long child_pid = 0;  // also its process group's id
  unsigned long long child_start = 0;
  std::string slurm_step;  // "JOB.STEP" under srun, else empty
};

std::string to_line(const RankProcesses& processes);
std::optional<RankProcesses> rank_processes_from_line(const std::string& line);
// <run dir>/logs/rank-N.attempt-A.pids, keyed by attempt as exit_record_path is.
std::string processes_record_path(const std::string& run_dir, int rank, const std::string& attempt);
// Every readable record of `attempt` in <run dir>/logs (files named for it whose line names it too).
std::vector<RankProcesses> read_rank_processes(const std::string& run_dir, const std::string& attempt);
// Removes every *.exit and *.pids in <run dir>/logs (before an attempt starts: the records of the
// attempts before it are not read again).
void clear_rank_records(const std::string& run_dir);

}  // namespace atl::launcher
