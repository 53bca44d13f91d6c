// What `atoll launch` runs and how it reads a failed job: the launcher command line for each mode
// (mpirun on this host, mpirun over a hostfile, srun inside a Slurm allocation), each rank wrapped in
// `atoll supervise`, and the exit records the supervisors leave in <run dir>/logs/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace atl::launcher {

enum class LaunchMode { kLocal, kHostfile, kSlurm };

struct LaunchRequest {
  LaunchMode mode = LaunchMode::kLocal;
  int ranks = 1;
  std::string hostfile;                 // kHostfile
  std::vector<std::string> extra_args;  // after --: passed to mpirun/srun unchanged
  bool as_root = false;                 // mpirun refuses root without --allow-run-as-root
  int cores = 1;                        // of this host, for --oversubscribe in local mode
  std::string srun_mpi;                 // kSlurm: the PMI plugin srun starts the ranks with (--mpi=)
};

// The MPI plugins `srun --mpi=list` names, each once, the pmix plugin's versions ("pmix_v4") among
// them: every value --mpi takes. Slurm 22.05 and later print "MPI plugin types are...", one
// tab-indented name per line and "specific pmix plugin versions available: pmix_v3,pmix_v4"; 20.11
// and 21.08 log "srun: MPI types are..." and then one "srun: NAME" line per plugin, versions included.
std::vector<std::string> srun_mpi_plugins(const std::string& srun_mpi_list_output);

// The plugin Open MPI's ranks need from srun: pmix, else the newest pmix_vN where only versioned
// ones are installed (Debian's Open MPI 4.1 is built against PMIx, not Slurm's PMI-1/PMI-2, so with
// the cluster's default MpiDefault=none its ranks die in MPI_Init). std::invalid_argument, one line
// naming what srun offers and the fix, when no pmix is among them.
std::string choose_srun_mpi(const std::vector<std::string>& plugins);

// The mode for the options given: --hostfile wins, then --slurm, then --mpirun; with none of them,
// Slurm when SLURM_JOB_ID is set (`slurm_job_id`), else local.
LaunchMode choose_mode(bool hostfile, bool slurm_flag, bool mpirun_flag, const char* slurm_job_id);

// `mpirun ...` or `srun ...`, ending just before the per-rank command.
std::vector<std::string> launcher_prefix(const LaunchRequest& request);

// A command's words joined by spaces, as `atoll launch` prints what it runs.
std::string command_line(const std::vector<std::string>& words);

// One rank's exit as its supervisor recorded it.
struct RankExit {
  int rank = -1;
  long pid = 0;
  std::string host;
  bool signaled = false;
  int code = 0;         // the exit code, or the signal number when signaled
  double time_s = 0.0;  // wall-clock seconds since the epoch
  bool failed() const { return signaled || code != 0; }
};

// Now, as RankExit::time_s counts it.
double seconds_since_epoch();
std::string to_line(const RankExit& exit);
std::optional<RankExit> rank_exit_from_line(const std::string& line);
std::string exit_record_path(const std::string& run_dir, int rank);
// Every rank-N.exit in <run dir>/logs; unreadable records are skipped.
std::vector<RankExit> read_rank_exits(const std::string& run_dir);
// The failure that came first in time (the cause; later ones are usually its consequences).
std::optional<RankExit> first_failure(const std::vector<RankExit>& exits);
// "rank 2 (pid 4242 on node7) was killed by signal 9 (SIGKILL)" / "... exited with code 1".
std::string describe(const RankExit& exit);

// Whether a job still running at `now_s` (seconds since the epoch) has outlived its first failed
// rank by more than `grace_s`. mpirun and srun end the whole job within seconds of a rank's failure,
// but mpirun waits on a node it cannot reach (its link cut, the node hung): Open MPI 4 has no
// daemon heartbeat, so it waits until TCP gives up, about 15 minutes, and no restart happens.
bool outlived_failure(const std::vector<RankExit>& exits, double now_s, double grace_s);

}  // namespace atl::launcher
