#include "launcher/job_launch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "runtime/process_exit.h"
#include "text/joined.h"

namespace atl::launcher {

LaunchMode choose_mode(bool hostfile, bool slurm_flag, bool mpirun_flag, const char* slurm_job_id) {
  if (hostfile) return LaunchMode::kHostfile;
  if (slurm_flag) return LaunchMode::kSlurm;
  if (mpirun_flag) return LaunchMode::kLocal;
  return slurm_job_id && *slurm_job_id ? LaunchMode::kSlurm : LaunchMode::kLocal;
}

std::string rank_count_mismatch(const runtime::Config& config, int np) {
  const int needed = config.job_ranks();
  if (np == needed) return "";
  const runtime::ParallelConfig& p = config.parallel;
  const auto product_of = [](const std::string& names, std::vector<int> dims, int cp) {
    if (cp > 1) dims.push_back(cp);
    return names + (cp > 1 ? "*cp" : "") + " = " +
           text::joined(dims, "*", [](int n) { return std::to_string(n); });
  };
  const std::string product = config.islands_are_jobs()
                                  ? product_of("pp*dp*tp", {p.pp, p.dp, p.tp}, p.cp) + ", one island per job"
                                  : product_of("islands*pp*dp*tp", {p.islands, p.pp, p.dp, p.tp}, p.cp);
  return "the layout needs " + std::to_string(needed) + " ranks (" + product + "); --np " +
         std::to_string(np) + " was given; drop --np, or change parallel.* to a layout of " +
         std::to_string(np) + " ranks";
}

std::string command_line(const std::vector<std::string>& words) {
  return text::joined(words, " ");
}

std::vector<std::string> JobCommand::words(const std::string& attempt) const {
  std::vector<std::string> command = launcher;
  command.insert(command.end(), {supervisor, "--attempt", attempt, run_dir, "--"});
  command.insert(command.end(), rank.begin(), rank.end());
  return command;
}

std::vector<std::string> launcher_prefix(const LaunchRequest& r) {
  std::vector<std::string> command;
  if (r.mode == LaunchMode::kSlurm) {
    // srun places the tasks on the allocation's nodes; one failed task ends the step, as mpirun does.
    command = {"srun", "--ntasks=" + std::to_string(r.ranks), "--kill-on-bad-exit=1"};
    if (!r.srun_mpi.empty()) command.push_back("--mpi=" + r.srun_mpi);
  } else {
    command = {"mpirun", "-np", std::to_string(r.ranks)};
    if (r.as_root) command.push_back("--allow-run-as-root");
    // mpirun passes only what it is told to the ranks of other hosts.
    command.insert(command.end(), {"-x", "ATOLL_PROGRESS"});
    if (r.mode == LaunchMode::kHostfile) {
      command.push_back("--hostfile");
      command.push_back(r.hostfile);
    } else {
      if (r.ranks > r.cores) command.push_back("--oversubscribe");
      // Each rank runs cores/ranks compute threads (run.threads 0) and, on a GPU node, NCCL's proxy
      // and the watchdog beside them: Open MPI's default binding (one core per rank at np <= 2)
      // would crowd them all onto one core.
      command.insert(command.end(), {"--bind-to", "none"});
    }
  }
  command.insert(command.end(), r.extra_args.begin(), r.extra_args.end());
  return command;
}

namespace {

// `line` without the "srun: " that Slurm 21.08 and older put before each line srun logs.
std::string_view without_srun_prefix(std::string_view line) {
  constexpr std::string_view kPrefix = "srun: ";
  return line.substr(0, kPrefix.size()) == kPrefix ? line.substr(kPrefix.size()) : line;
}

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// A plugin's name as srun prints it: letters, digits and '_' ("pmix", "pmix_v4", "cray_shasta").
bool is_plugin_name(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// pmix_vN's N (-1 for any other name): the newest of several versions is the one to take.
int pmix_version(const std::string& plugin) {
  constexpr std::string_view kVersioned = "pmix_v";
  if (plugin.rfind(kVersioned, 0) != 0 || plugin.size() == kVersioned.size()) return -1;
  int version = 0;
  for (size_t i = kVersioned.size(); i < plugin.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(plugin[i])) || version > 100000) return -1;
    version = version * 10 + (plugin[i] - '0');
  }
  return version;
}

}  // namespace

std::vector<std::string> srun_mpi_plugins(const std::string& output) {
  std::vector<std::string> plugins;
  const auto add = [&plugins](std::string_view name) {
    if (is_plugin_name(name) && std::find(plugins.begin(), plugins.end(), name) == plugins.end())
      plugins.emplace_back(name);
  };
  constexpr std::string_view kVersions = "specific pmix plugin versions available:";
  std::istringstream in(output);
  std::string line;
  bool listing = false;
  while (std::getline(in, line)) {
    const std::string_view text = trimmed(without_srun_prefix(line));
    if (text.find("MPI plugin types are") != std::string_view::npos ||
        text.find("MPI types are") != std::string_view::npos) {
      listing = true;
    } else if (listing && text.substr(0, kVersions.size()) == kVersions) {
      // "pmix_v3,pmix_v4": each a value --mpi takes as well.
      std::string_view versions = text.substr(kVersions.size());
      while (!versions.empty()) {
        const size_t comma = versions.find(',');
        add(trimmed(versions.substr(0, comma)));
        versions = comma == std::string_view::npos ? std::string_view() : versions.substr(comma + 1);
      }
    } else if (listing) {
      add(text);  // a name; anything else srun says in between ("error: ...") is passed over
    }
  }
  return plugins;
}

std::string choose_srun_mpi(const std::vector<std::string>& plugins) {
  std::string newest;
  for (const std::string& p : plugins) {
    if (p == "pmix") return p;
    if (pmix_version(p) > (newest.empty() ? -1 : pmix_version(newest))) newest = p;
  }
  if (!newest.empty()) return newest;
  const std::string offered = text::joined(plugins, ", ");
  throw std::invalid_argument(
      "--slurm: srun has no pmix MPI plugin (srun --mpi=list offers: " +
      (offered.empty() ? "nothing" : offered) +
      "), and Open MPI's ranks need PMIx to start under srun; install Slurm's pmix plugin (Debian: "
      "slurm-wlm's mpi_pmix), set SLURM_MPI_TYPE to a plugin your Open MPI supports, or run mpirun "
      "inside the allocation (--mpirun)");
}

int job_exit_status(int launcher_status, const std::optional<RankExit>& cause) {
  return cause ? cause->status() : launcher_status;
}

void FailureWatch::observe(const std::vector<RankExit>& exits, double now_s) {
  std::map<int, Seen> failures;
  for (const RankExit& e : exits) {
    if (!e.failed()) continue;
    const auto before = failures_.find(e.rank);
    failures.emplace(e.rank, Seen{e, before == failures_.end() ? now_s : before->second.first_seen_s});
  }
  failures_ = std::move(failures);
}

bool FailureWatch::outlived(double now_s) const {
  return std::any_of(failures_.begin(), failures_.end(),
                     [&](const auto& failure) { return now_s - failure.second.first_seen_s > grace_s_; });
}

std::optional<RankExit> FailureWatch::cause() const {
  if (failures_.empty()) return std::nullopt;
  double first_s = failures_.begin()->second.first_seen_s;
  for (const auto& [rank, seen] : failures_) first_s = std::min(first_s, seen.first_seen_s);
  std::vector<RankExit> read_first;
  for (const auto& [rank, seen] : failures_)
    if (seen.first_seen_s == first_s) read_first.push_back(seen.exit);
  return first_failure(read_first);
}

}  // namespace atl::launcher
