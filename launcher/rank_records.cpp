#include "launcher/rank_records.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/process_exit.h"

namespace atl::launcher {

bool valid_attempt_name(const std::string& attempt) {
  return !attempt.empty() && std::all_of(attempt.begin(), attempt.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

namespace {

// A record's attempt as its line carries it: "-" for none.
std::string attempt_word(const std::string& attempt) {
  return attempt.empty() ? "-" : attempt;
}
std::string attempt_from_word(const std::string& word) {
  return word == "-" ? "" : word;
}

// A record file's name: rank-N.attempt-A.EXTENSION, rank-N.EXTENSION for no attempt.
std::string record_name(int rank, const std::string& attempt, const std::string& extension) {
  return "rank-" + std::to_string(rank) + (attempt.empty() ? "" : ".attempt-" + attempt) + extension;
}

struct RecordLine {
  std::string file_name;
  std::string line;
};

// The first line of every <run dir>/logs/*.EXTENSION.
std::vector<RecordLine> first_lines(const std::string& run_dir, const std::string& extension) {
  std::vector<RecordLine> lines;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/logs", error)) {
    if (entry.path().extension() != extension) continue;
    std::ifstream in(entry.path());
    std::string line;
    std::getline(in, line);
    lines.push_back({entry.path().filename().string(), line});
  }
  return lines;
}

}  // namespace

std::string to_line(const RankExit& e) {
  std::ostringstream out;
  out.precision(17);
  out << "rank " << e.rank << " pid " << e.pid << " host " << e.host << (e.signaled ? " signal " : " code ")
      << e.code << " time " << e.time_s << " attempt " << attempt_word(e.attempt) << "\n";
  return out.str();
}

std::optional<RankExit> rank_exit_from_line(const std::string& line) {
  std::istringstream in(line);
  RankExit e;
  std::string rank, pid, host, kind, time;
  if (!(in >> rank >> e.rank >> pid >> e.pid >> host >> e.host >> kind >> e.code >> time >> e.time_s))
    return std::nullopt;
  if (rank != "rank" || pid != "pid" || host != "host" || time != "time" ||
      (kind != "signal" && kind != "code"))
    return std::nullopt;
  e.signaled = kind == "signal";
  // A record without an attempt is one of a supervisor from before attempts were named.
  std::string attempt, word, rest;
  if (in >> attempt) {
    if (attempt != "attempt" || !(in >> word) || in >> rest) return std::nullopt;
    e.attempt = attempt_from_word(word);
  }
  return e;
}

std::string exit_record_path(const std::string& run_dir, int rank, const std::string& attempt) {
  return run_dir + "/logs/" + record_name(rank, attempt, ".exit");
}

std::vector<RankExit> read_rank_exits(const std::string& run_dir) {
  std::vector<RankExit> exits;
  for (const RecordLine& record : first_lines(run_dir, ".exit"))
    if (const std::optional<RankExit> e = rank_exit_from_line(record.line)) exits.push_back(*e);
  return exits;
}

std::vector<RankExit> read_rank_exits(const std::string& run_dir, const std::string& attempt) {
  std::vector<RankExit> exits;
  for (const RecordLine& record : first_lines(run_dir, ".exit")) {
    const std::optional<RankExit> e = rank_exit_from_line(record.line);
    if (e && e->attempt == attempt && record.file_name == record_name(e->rank, attempt, ".exit"))
      exits.push_back(*e);
  }
  return exits;
}

std::optional<RankExit> first_failure(const std::vector<RankExit>& exits) {
  std::optional<RankExit> first;
  for (const RankExit& e : exits)
    if (e.failed() && (!first || e.time_s < first->time_s)) first = e;
  return first;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string describe(const RankExit& e) {
  std::string out =
      "rank " + std::to_string(e.rank) + " (pid " + std::to_string(e.pid) + " on " + e.host + ") ";
  if (!e.signaled) return out + "exited with code " + std::to_string(e.code);
  return out + "was killed by signal " + std::to_string(e.code) + " (" + runtime::signal_name(e.code) + ")";
}

std::string to_line(const RankProcesses& p) {
  std::ostringstream out;
  out << "rank " << p.rank << " attempt " << attempt_word(p.attempt) << " host " << p.host << " supervisor "
      << p.supervisor_pid << " " << p.supervisor_pgid << " " << p.supervisor_start << " child " << p.child_pid
      << " " << p.child_start << " step " << (p.slurm_step.empty() ? "-" : p.slurm_step) << "\n";
  return out.str();
}

std::optional<RankProcesses> rank_processes_from_line(const std::string& line) {
  std::istringstream in(line);
  RankProcesses p;
  std::string rank, attempt_key, attempt, host, supervisor, child, step_key, step, rest;
  if (!(in >> rank >> p.rank >> attempt_key >> attempt >> host >> p.host >> supervisor >> p.supervisor_pid >>
        p.supervisor_pgid >> p.supervisor_start >> child >> p.child_pid >> p.child_start >> step_key >>
        step) ||
      in >> rest)
    return std::nullopt;
  if (rank != "rank" || attempt_key != "attempt" || host != "host" || supervisor != "supervisor" ||
      child != "child" || step_key != "step")
    return std::nullopt;
  p.attempt = attempt_from_word(attempt);
  p.slurm_step = step == "-" ? "" : step;
  return p;
}

std::string processes_record_path(const std::string& run_dir, int rank, const std::string& attempt) {
  return run_dir + "/logs/" + record_name(rank, attempt, ".pids");
}

std::vector<RankProcesses> read_rank_processes(const std::string& run_dir, const std::string& attempt) {
  std::vector<RankProcesses> records;
  for (const RecordLine& record : first_lines(run_dir, ".pids")) {
    const std::optional<RankProcesses> p = rank_processes_from_line(record.line);
    if (p && p->attempt == attempt && record.file_name == record_name(p->rank, attempt, ".pids"))
      records.push_back(*p);
  }
  return records;
}

void clear_rank_records(const std::string& run_dir) {
  std::error_code error;
  std::vector<std::filesystem::path> records;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/logs", error))
    if (entry.path().extension() == ".exit" || entry.path().extension() == ".pids")
      records.push_back(entry.path());
  for (const std::filesystem::path& record : records) std::filesystem::remove(record, error);
}

}  // namespace atl::launcher
