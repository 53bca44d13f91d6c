// What `atoll launch` runs and how it reads a failed job: the launcher command line for each mode
// (mpirun on this host, mpirun over a hostfile, srun inside a Slurm allocation), each rank wrapped in
// `atoll-supervise`, and which failure the supervisors' records (launcher/rank_records.h) name as
// the cause.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/rank_records.h"
#include "runtime/config/config.h"

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

// `--np N` against the ranks `config`'s layout needs, for `atoll launch` and `atoll plan` before
// anything starts: "the layout needs 2 ranks (islands*pp*dp*tp = 1*1*2*1); --np 3 was given; ..."
// (empty when they agree).
std::string rank_count_mismatch(const runtime::Config& config, int np);

// A command's words joined by spaces, as `atoll launch` prints what it runs.
std::string command_line(const std::vector<std::string>& words);

// What one attempt of a job runs: the launcher's words, then each rank's `atoll-supervise --attempt
// NAME RUN_DIR -- atoll train ...`. The attempt (each launch and relaunch its own name) travels on
// the supervisor's command line, which every launcher passes unchanged: srun under `sbatch
// --export=NONE` passes no environment variable to the ranks, mpirun only those named with -x.
struct JobCommand {
  std::vector<std::string> launcher;  // launcher_prefix's mpirun ... or srun ...
  std::string supervisor;             // atoll-supervise, beside this executable
  std::string run_dir;
  std::vector<std::string> rank;  // what each supervisor runs: `atoll train CONFIG ...`
  std::vector<std::string> words(const std::string& attempt) const;
};

// What `atoll launch` exits with after a failed job: the status of the rank that failed first, when
// a record names one (also when the launcher ended mpirun or srun itself, which then reports 137 or
// 143), else the status of mpirun or srun.
int job_exit_status(int launcher_status, const std::optional<RankExit>& cause);

// One attempt's failed ranks as the launcher reads their records, each with when it first read it
// on its own clock. That order, never the time in a record (each rank's host's clock wrote its
// own), names the cause and starts the grace after which a job still running is ended: mpirun and
// srun end the whole job within seconds of a rank's failure, but mpirun waits on a node it cannot
// reach (its link cut, the node hung): Open MPI 4 has no daemon heartbeat, so it waits until TCP
// gives up, about 15 minutes, and no restart happens.
class FailureWatch {
 public:
  explicit FailureWatch(double grace_s) : grace_s_(grace_s) {}
  // Takes in `exits`, one attempt's records read at `now_s` (seconds on this host's steady clock):
  // its failures are those on record now, each kept with when it was first read.
  void observe(const std::vector<RankExit>& exits, double now_s);
  // Whether the failure read first has been on record for more than the grace at `now_s`.
  bool outlived(double now_s) const;
  // The cause: the failure read first; of several first read together, the one first_failure
  // picks among them (within one read the records' times are all there is to go by).
  std::optional<RankExit> cause() const;

 private:
  struct Seen {
    RankExit exit;
    double first_seen_s = 0.0;
  };
  double grace_s_;
  std::map<int, Seen> failures_;  // by rank
};

}  // namespace atl::launcher
