// `atoll launch CONFIG [options] [-- LAUNCHER_ARGS]`: computes the rank count from the layout, starts
// the job with mpirun (this host, or a hostfile's hosts) or srun (inside a Slurm allocation), each
// rank under `atoll-supervise`, and with --max-restarts relaunches a failed job from its last
// committed checkpoint. SIGTERM or SIGUSR1 to the launcher preempts the job: every rank finishes its
// step, commits a checkpoint and exits 0.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint/remove_tree.h"
#include "launcher/child_process.h"
#include "launcher/commands.h"
#include "launcher/job_launch.h"
#include "runtime/config/config.h"
#include "runtime/host/usable_cpus.h"
#include "runtime/metrics/metrics.h"
#include "runtime/process_exit.h"

namespace atl::launcher {

namespace {

// What `srun --mpi=list` prints: the MPI plugins this Slurm offers (empty if srun cannot run).
std::string srun_mpi_list() {
  std::string out;
  if (FILE* pipe = popen("srun --mpi=list 2>&1", "r")) {
    char buffer[512];
    while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
    pclose(pipe);
  }
  return out;
}

// A directory of this launch's own for Open MPI's session files (TMPDIR, which mpirun and its
// ranks inherit), removed when the launch ends. Open MPI 4 keeps every mpirun's session files under
// one shared per-user directory that the last job to finish removes: a second mpirun starting on
// the same host in that instant (island jobs side by side) fails its orte_init ("mkdir failed").
class SessionDirectory {
 public:
  SessionDirectory() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/atoll-launch-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return;  // Open MPI's own default stays
    path_ = pattern;
    setenv("TMPDIR", path_.c_str(), 1);
  }
  ~SessionDirectory() {
    try {
      if (!path_.empty()) checkpoint::remove_tree(path_);
    } catch (const std::exception&) {  // a leftover directory in TMPDIR is not worth failing the job
    }
  }
  SessionDirectory(const SessionDirectory&) = delete;
  SessionDirectory& operator=(const SessionDirectory&) = delete;

 private:
  std::string path_;
};

constexpr const char* kLaunchUsage =
    "atoll launch CONFIG [--np N] [--hostfile FILE | --slurm | --mpirun] [--max-restarts N] "
    "[--failure-grace S] [--dry-run] [--verbose] "
    "[--set key=value]... [-- LAUNCHER_ARGS]";

std::string self_executable() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("cannot locate the atoll executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

struct LaunchOptions {
  std::optional<int> np;
  std::string hostfile;
  bool slurm = false, mpirun = false, dry_run = false, verbose = false;
  int max_restarts = 0;
  // Seconds a job may run on once a rank's failure is on record before the launcher ends it.
  int failure_grace_s = 20;
  std::vector<std::string> extra;
};

LaunchOptions parse_options(const Args& rest) {
  LaunchOptions o;
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= rest.size()) throw std::invalid_argument(a + " needs a value; usage: " + kLaunchUsage);
      return rest[++i];
    };
    if (a == "--np") {
      o.np = non_negative(a, value());
      if (*o.np == 0) throw std::invalid_argument("--np 0: a job needs at least one rank");
    } else if (a == "--hostfile") {
      o.hostfile = value();
      if (!std::filesystem::is_regular_file(o.hostfile))
        throw std::invalid_argument(
            "--hostfile " + o.hostfile +
            " does not exist; give a file of 'host slots=N' lines (Open MPI's format)");
    } else if (a == "--max-restarts") {
      o.max_restarts = non_negative(a, value());
    } else if (a == "--failure-grace") {
      o.failure_grace_s = non_negative(a, value());
    } else if (a == "--slurm") {
      o.slurm = true;
    } else if (a == "--mpirun") {
      o.mpirun = true;
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (a == "--verbose") {
      o.verbose = true;
    } else if (a == "--") {
      o.extra.assign(rest.begin() + static_cast<long>(i) + 1, rest.end());
      break;
    } else {
      throw std::invalid_argument("unknown option '" + a + "'; usage: " + kLaunchUsage);
    }
  }
  if (o.slurm + o.mpirun + !o.hostfile.empty() > 1)
    throw std::invalid_argument("--hostfile, --slurm and --mpirun each pick the launcher; give at most one");
  return o;
}

void append_event(const std::string& run_dir, const runtime::JsonRecord& record) {
  std::filesystem::create_directories(run_dir);
  runtime::MetricsLog(run_dir + "/metrics.jsonl").write(record);
}

void print_help() {
  std::cout
      << "usage: " << kLaunchUsage << "\n\n"
      << "Starts islands*pp*dp*tp ranks (pp*dp*tp with outer.rendezvous: one island per job; or --np N),\n"
      << "each under `atoll-supervise` (per-rank logs and exit\n"
      << "records in <run.dir>/logs/):\n"
      << "  default      mpirun on this host (--oversubscribe when there are more ranks than cores);\n"
      << "               srun instead when run inside a Slurm allocation (SLURM_JOB_ID is set)\n"
      << "  --hostfile   mpirun over the hosts of FILE (Open MPI format: 'host slots=N')\n"
      << "  --slurm      srun --ntasks=N --mpi=pmix (inside salloc/sbatch; SLURM_MPI_TYPE names another\n"
      << "               PMI plugin); --mpirun forces mpirun\n"
      << "  --max-restarts N  relaunch a job whose rank died or hung from the last committed checkpoint,\n"
      << "               up to N times (not for bad input or a non-finite stop: those fail again)\n"
      << "  --failure-grace S  end a job still running S seconds after a rank's failure is on record,\n"
      << "               as one waiting on a node it cannot reach does (default 20)\n"
      << "  --dry-run    print the command and exit\n"
      << "  --verbose    the whole resolved config and the rank table on the console too (they are\n"
      << "               always in <run.dir>/config.txt and ranks.txt)\n"
      << "SIGTERM or SIGUSR1 to this process preempts the job: every rank finishes its step, commits a\n"
      << "checkpoint and exits 0. Arguments after -- go to mpirun/srun unchanged.\n";
}

// Which launcher starts the job, with how many ranks, and what it needs to know of this host.
LaunchRequest launch_request(const LaunchOptions& options, const runtime::Config& config) {
  LaunchRequest request;
  request.mode =
      choose_mode(!options.hostfile.empty(), options.slurm, options.mpirun, std::getenv("SLURM_JOB_ID"));
  if (request.mode == LaunchMode::kSlurm && !std::getenv("SLURM_JOB_ID"))
    throw std::invalid_argument(
        "--slurm needs a Slurm allocation (SLURM_JOB_ID is not set); run inside salloc or sbatch, or drop "
        "--slurm");
  if (request.mode == LaunchMode::kSlurm) {
    // The cluster's MpiDefault may be none (Slurm's own default): name the plugin the ranks need.
    const char* chosen = std::getenv("SLURM_MPI_TYPE");
    request.srun_mpi =
        chosen && *chosen ? std::string(chosen) : choose_srun_mpi(srun_mpi_plugins(srun_mpi_list()));
  }
  request.ranks = options.np.value_or(config.job_ranks());
  request.hostfile = options.hostfile;
  request.extra_args = options.extra;
  request.as_root = geteuid() == 0;
  request.cores = runtime::usable_cpus();  // the CPUs mpirun may place ranks on (taskset, cgroups)
  return request;
}

// atoll-supervise beside `atoll` (the build puts them side by side; every rank's host needs both).
std::string supervisor_beside(const std::string& atoll) {
  const std::string supervisor = (std::filesystem::path(atoll).parent_path() / "atoll-supervise").string();
  if (access(supervisor.c_str(), X_OK) != 0)
    throw std::runtime_error("no executable " + supervisor + " beside " + atoll +
                             " (what runs each rank); build it: bash scripts/build.sh atoll");
  return supervisor;
}

// The launcher, then each rank's `atoll-supervise --attempt NAME RUN_DIR -- atoll train ...`.
JobCommand job_command(const LaunchRequest& request, const ConfigArgs& parsed, const runtime::Config& config,
                       bool verbose) {
  JobCommand command;
  command.launcher = launcher_prefix(request);
  const std::string atoll = self_executable();
  command.supervisor = supervisor_beside(atoll);
  command.run_dir = config.run.dir;
  command.rank = {atoll, "train", parsed.config_path};
  for (const std::string& o : parsed.overrides) command.rank.insert(command.rank.end(), {"--set", o});
  if (verbose) command.rank.push_back("--verbose");
  return command;
}

// Attempt `n` of the launch named `launch_name` (each launch's name unique across launches too).
std::string attempt_name(const std::string& launch_name, int n) {
  return launch_name + "." + std::to_string(n);
}

// How the launcher runs mpirun or srun: signals to it translated, in a process group of its own.
ChildOptions launcher_child_options(LaunchMode mode) {
  ChildOptions options;
  // mpirun ends the job on SIGTERM, and srun SIGKILLs its step on it ("srun: forcing job
  // termination"); both pass SIGUSR1 on to every rank. In a process group of their own, they
  // hear of a SIGTERM to ours (Slurm's --signal=B:TERM, to the batch shell) only through this.
  options.forward = [mode](int signal) {
    const int sent = signal == SIGINT ? signal : SIGUSR1;
    // The ranks see the forwarded signal: name the one the user sent here, once.
    if (signal == SIGTERM || signal == SIGUSR1)
      std::cout << "atoll launch: " << runtime::signal_name(signal)
                << " received: every rank finishes its step, commits a checkpoint and exits 0"
                << (sent != signal ? std::string(mode == LaunchMode::kSlurm ? " (srun" : " (mpirun") +
                                         " passes it to the ranks as " + runtime::signal_name(sent) + ")"
                                   : std::string())
                << std::endl;
    return sent;
  };
  options.own_process_group = true;
  return options;
}

// Says why the job failed (the first failed rank's exit record, else the launcher's status) and, when
// the launcher was ended by us, that it had outlived the failure; returns the reason.
std::string report_failure(const ChildExit& job, const std::optional<RankExit>& cause,
                           const std::string& launcher_name, double straggler_grace_s,
                           const std::string& run_dir) {
  if (job.abandoned)
    std::cerr << "atoll launch: " << launcher_name << " had not ended " << straggler_grace_s << " s after "
              << (cause ? "rank " + std::to_string(cause->rank) : std::string("a rank"))
              << " failed (a node it cannot reach?); ended it" << std::endl;
  const std::string why =
      cause ? describe(*cause) : launcher_name + " exited with status " + std::to_string(job.status());
  std::cerr << "atoll launch: the job failed: " << why << " (log: " << run_dir << "/logs/rank-"
            << (cause ? std::to_string(cause->rank) : std::string("N")) << ".log)" << std::endl;
  return why;
}

// Seconds on this host's steady clock.
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

// "rank 1 (pid 4242 under supervisor 4240 on node0)".
std::string describe_processes(const RankProcesses& p) {
  return "rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.child_pid) + " under supervisor " +
         std::to_string(p.supervisor_pid) + " on " + p.host + ")";
}

// How long the ranks of an ended attempt on this host may take to be gone after SIGKILL.
constexpr double kRanksGone_s = 10.0;

// Ends what an attempt left running and checks that none of its ranks on this host is alive: SIGKILL
// to the process groups of each rank still there (its supervisor's, which Open MPI makes one per
// rank, and the rank's own under it) and, with `cancel_steps`, `scancel --signal=KILL` of the
// attempt's Slurm job steps on every node. Waits up to kRanksGone_s; returns the ranks still alive.
// Ranks on other hosts are mpirun's daemons' to end there (or Slurm's): their pids mean nothing here.
std::vector<RankProcesses> end_leftover_ranks(const std::string& run_dir, const std::string& attempt,
                                              bool cancel_steps) {
  const std::string host = this_host();
  std::vector<RankProcesses> here;
  std::set<std::string> steps;
  for (const RankProcesses& p : read_rank_processes(run_dir, attempt)) {
    if (!p.slurm_step.empty()) steps.insert(p.slurm_step);
    if (p.host == host) here.push_back(p);
  }
  if (cancel_steps) {
    ChildOptions quiet;
    quiet.output = [](int, const char*, size_t) {};  // "already completed" is no news
    for (const std::string& step : steps) run_child({"scancel", "--signal=KILL", step}, quiet);
  }
  const pid_t own_group = getpgrp();
  const auto kill_group = [own_group](long pgid) {
    if (pgid > 1 && pgid != own_group) kill(-static_cast<pid_t>(pgid), SIGKILL);
  };
  for (const RankProcesses& p : here) {
    if (process_alive(p.supervisor_pid, p.supervisor_start)) {
      kill_group(p.supervisor_pgid);
      kill(static_cast<pid_t>(p.supervisor_pid), SIGKILL);
    }
    if (process_alive(p.child_pid, p.child_start)) {
      kill_group(p.child_pid);
      kill(static_cast<pid_t>(p.child_pid), SIGKILL);
    }
  }
  const double deadline_s = steady_seconds() + kRanksGone_s;
  for (;;) {
    std::vector<RankProcesses> alive;
    for (const RankProcesses& p : here)
      if (process_alive(p.supervisor_pid, p.supervisor_start) || process_alive(p.child_pid, p.child_start))
        alive.push_back(p);
    if (alive.empty() || steady_seconds() > deadline_s) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Runs the job and, after a failure a restart may cure, relaunches it from its last committed
// checkpoint, up to `max_restarts` times. Returns the exit status of `atoll launch`.
int run_with_restarts(JobCommand command, LaunchMode mode, const std::string& launch_name, int max_restarts,
                      double failure_grace_s) {
  const std::string& run_dir = command.run_dir;
  const std::string launcher_name = mode == LaunchMode::kSlurm ? "srun" : "mpirun";
  ChildOptions child_options = launcher_child_options(mode);
  // mpirun's job a session directory of its own; srun's ranks (started through PMIx) make none.
  std::optional<SessionDirectory> session_directory;
  if (mode != LaunchMode::kSlurm) session_directory.emplace();
  // A job still running failure_grace_s after a rank failed is waiting on a node it cannot reach:
  // end it (SIGTERM, SIGKILL kEndGrace_s later: mpirun itself gives its ranks 2 s between the two),
  // so that the failure is reported and --max-restarts can act. The exit records are read at most
  // once a second while the job runs, and once after it ended: the order of these reads names the
  // cause.
  constexpr double kEndGrace_s = 5.0;
  child_options.end_grace_s = kEndGrace_s;
  std::string attempt;
  FailureWatch failures(failure_grace_s);
  double next_look_s = 0.0;
  child_options.abandon = [&] {
    const double now_s = steady_seconds();
    if (now_s < next_look_s) return false;
    next_look_s = now_s + 1.0;
    failures.observe(read_rank_exits(run_dir, attempt), now_s);
    return failures.outlived(now_s);
  };
  for (int n = 0;; ++n) {
    attempt = attempt_name(launch_name, n);
    clear_rank_records(run_dir);
    failures = FailureWatch(failure_grace_s);
    const ChildExit job = run_child(command.words(attempt), child_options);
    if (job.received_signal != 0 || (job.status() == 0 && !job.abandoned)) return job.status();
    failures.observe(read_rank_exits(run_dir, attempt), steady_seconds());
    const std::optional<RankExit> cause = failures.cause();
    const std::string why = report_failure(job, cause, launcher_name, failure_grace_s, run_dir);
    const int status = job_exit_status(job.status(), cause);
    const std::vector<RankProcesses> alive =
        end_leftover_ranks(run_dir, attempt, mode == LaunchMode::kSlurm && job.abandoned);
    if (!alive.empty()) {
      std::cerr << "atoll launch: " << describe_processes(alive.front())
                << (alive.size() > 1 ? " and " + std::to_string(alive.size() - 1) + " more rank(s)" : "")
                << " of the failed attempt still alive " << kRanksGone_s
                << " s after SIGKILL; not relaunching while it may still write to " << run_dir << std::endl;
      return runtime::kExitFailure;
    }
    if (cause && !runtime::restart_may_help(cause->signaled, cause->code)) {
      if (max_restarts > 0)
        std::cerr << "atoll launch: not restarting: exit code " << cause->code
                  << " means bad input or a non-finite stop, which a relaunch repeats" << std::endl;
      return status;
    }
    if (n >= max_restarts) {
      if (max_restarts > 0)
        std::cerr << "atoll launch: giving up after " << max_restarts << " restart(s)" << std::endl;
      return status;
    }
    append_event(run_dir, runtime::JsonRecord()
                              .add("event", std::string("restart"))
                              .add("attempt", static_cast<int64_t>(n + 1))
                              .add("failed_rank", static_cast<int64_t>(cause ? cause->rank : -1))
                              .add("reason", why));
    std::cerr << "atoll launch: restart " << n + 1 << " of " << max_restarts
              << " from the last committed checkpoint" << std::endl;
    // A restart always resumes from the newest committed checkpoint, whatever the config said.
    if (n == 0) command.rank.insert(command.rank.end(), {"--set", "checkpoint.resume=auto"});
  }
}

}  // namespace

int launch_command(const Args& args) {
  if (wants_help(args)) {
    print_help();
    return 0;
  }
  const ConfigArgs parsed = parse_config_args(args, kLaunchUsage);
  const LaunchOptions options = parse_options(parsed.rest);
  const runtime::Config config = runtime::load_config(parsed.config_path, parsed.overrides);
  if (options.np)
    if (const std::string mismatch = rank_count_mismatch(config, *options.np); !mismatch.empty())
      throw std::invalid_argument(mismatch);
  const LaunchRequest request = launch_request(options, config);

  // A rank's output is a pipe: tell rank 0 whether the user watches a terminal.
  if (!std::getenv("ATOLL_PROGRESS")) setenv("ATOLL_PROGRESS", isatty(STDOUT_FILENO) ? "bar" : "plain", 1);
  const JobCommand command = job_command(request, parsed, config, options.verbose);
  const std::string launch_name =
      std::to_string(static_cast<long long>(seconds_since_epoch())) + "-" + std::to_string(getpid());
  std::cout << "atoll launch: " << command_line(command.words(attempt_name(launch_name, 0))) << std::endl;
  if (options.dry_run) return 0;
  if (options.max_restarts > 0 && config.checkpoint.every == 0)
    std::cout << "atoll launch: note: checkpoint.every = 0, so a restart begins again from step 0"
              << std::endl;
  return run_with_restarts(command, request.mode, launch_name, options.max_restarts, options.failure_grace_s);
}

}  // namespace atl::launcher
