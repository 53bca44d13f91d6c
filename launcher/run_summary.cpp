#include "launcher/run_summary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <utility>

#include "runtime/config/config.h"
#include "runtime/metrics/console_lines.h"

namespace atl::launcher {
namespace {

using runtime::formatted;

// ---------------------------------------------------------------------------------------------
// Reading metrics.jsonl

// A line that holds no readable record; the reader turns it into a note.
struct BadLine : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Json = nlohmann::json;

// One line of metrics.jsonl as JSON. Logs written before Atoll used nlohmann-json hold nan, -nan, inf
// and -inf as bare words (printf's %.17g), which no JSON reader takes: a line that does not parse is
// read again with them quoted, and number() reads them back.
Json parse_line(const std::string& line) {
  try {
    return Json::parse(line);
  } catch (const Json::parse_error&) {
    static const std::regex bare_non_finite(R"re(([:,\[]\s*)(-?(?:nan|inf))(?=\s*[,\]}]))re");
    const std::string quoted = std::regex_replace(line, bare_non_finite, "$1\"$2\"");
    if (quoted == line) throw;
    return Json::parse(quoted);
  }
}

// A number as written: a JSON number, null for a NaN or an infinity (how nlohmann-json writes them),
// or an older log's quoted nan/inf.
double number(const Json& record, const char* key) {
  const auto value = record.find(key);
  if (value != record.end() && value->is_number()) return value->get<double>();
  if (value != record.end() && value->is_null()) return std::nan("");
  if (value != record.end() && value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0') return parsed;
  }
  throw BadLine(std::string("\"") + key + "\" is not a number");
}

double number_or(const Json& record, const char* key, double fallback) {
  return record.contains(key) ? number(record, key) : fallback;
}

// A count (a step, an attempt, a rank): a whole number a double holds exactly, or the line is bad.
int64_t integer(const Json& record, const char* key) {
  const double value = number(record, key);
  if (!(std::fabs(value) <= 9007199254740992.0))  // 2^53; NaN fails too
    throw BadLine(std::string("\"") + key + "\" is not a count");
  return static_cast<int64_t>(std::llround(value));
}

std::string text_or(const Json& record, const char* key, const std::string& fallback) {
  const auto value = record.find(key);
  return value != record.end() && value->is_string() ? value->get<std::string>() : fallback;
}

// A flag written as 1 (or true); absent, 0 and false read as false.
bool flag(const Json& record, const char* key) {
  const auto value = record.find(key);
  if (value == record.end()) return false;
  return value->is_boolean() ? value->get<bool>() : value->is_number() && value->get<double>() != 0.0;
}

struct StepRecord {
  double loss = 0.0, tokens_per_s = 0.0, mfu = 0.0, step_s = 0.0, checkpoint_wait_s = 0.0;
  std::optional<double> kv_wait_s;
  bool skipped = false;
  bool warmup = false;  // the first step after a (re)start: its throughput includes one-time costs
};

struct ValRecord {
  double loss = 0.0;
  std::optional<double> outer;
};

// Drops what was recorded after `step` (a map or set keyed by step).
template <typename ByStep>
void erase_after(ByStep& by_step, int64_t step) {
  by_step.erase(by_step.upper_bound(step), by_step.end());
}

double median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  return 0.5 * (values[mid] + *std::max_element(values.begin(), values.begin() + static_cast<long>(mid)));
}

double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// Accumulates records in log order; keyed by step so that a replayed step replaces the earlier one.
class MetricsReader {
 public:
  // Throws BadLine, before changing anything, when the record cannot be read.
  void read(const Json& record) {
    if (!record.is_object()) throw BadLine("not a JSON object");
    if (record.contains("event")) return read_event(record);
    if (!record.contains("step")) return;  // a kind this reader does not know: newer runtimes may add some
    const int64_t step = integer(record, "step");
    if (record.contains("loss")) {
      StepRecord r;
      r.loss = number(record, "loss");
      r.tokens_per_s = number_or(record, "tokens_per_s", 0.0);
      r.mfu = number_or(record, "mfu", 0.0);
      r.step_s = number_or(record, "step_s", 0.0);
      r.checkpoint_wait_s = number_or(record, "checkpoint_wait_s", 0.0);
      if (record.contains("kv_wait_s")) r.kv_wait_s = number(record, "kv_wait_s");
      r.skipped = flag(record, "skipped");
      r.warmup = next_is_warmup_;
      steps_[step] = r;
      next_is_warmup_ = false;
    } else if (record.contains("checkpoint_s")) {
      checkpoint_s_[step] = number(record, "checkpoint_s");
    } else if (record.contains("val_loss")) {
      ValRecord v;
      v.loss = number(record, "val_loss");
      if (record.contains("val_loss_outer")) v.outer = number(record, "val_loss_outer");
      val_[step] = v;
    }
  }

  RunSummary summary() const {
    RunSummary s;
    std::vector<double> tokens_per_s, mfu;
    std::set<int64_t> skipped = nonfinite_skips_;
    for (const auto& [step, r] : steps_) {
      s.train_loss.push_back({step, r.loss});
      s.train_seconds += r.step_s;
      s.checkpoint_wait_s += r.checkpoint_wait_s;
      if (r.kv_wait_s) s.kv_wait_s = s.kv_wait_s.value_or(0.0) + *r.kv_wait_s;
      if (r.skipped) skipped.insert(step);
      if (!r.warmup) {
        tokens_per_s.push_back(r.tokens_per_s);
        mfu.push_back(r.mfu);
      }
    }
    if (!s.train_loss.empty()) {
      s.steps = s.train_loss.back().step;
      s.first_loss = s.train_loss.front();
      s.final_loss = s.train_loss.back();
    }
    if (!tokens_per_s.empty()) {
      s.median_tokens_per_s = median(tokens_per_s);
      s.mean_tokens_per_s = mean(tokens_per_s);
      s.mean_mfu = mean(mfu);
      s.throughput_steps = static_cast<int64_t>(tokens_per_s.size());
    }
    for (const auto& [step, v] : val_) {
      s.val_loss.push_back({step, v.loss});
      if (v.outer) s.val_loss_outer.push_back({step, *v.outer});
      if (std::isfinite(v.loss) && (!s.best_val_loss || v.loss < s.best_val_loss->loss))
        s.best_val_loss = LossPoint{step, v.loss};
    }
    if (!s.val_loss.empty()) s.final_val_loss = s.val_loss.back();
    std::vector<double> stalls;
    for (const auto& [step, seconds] : checkpoint_s_) stalls.push_back(seconds);
    s.checkpoints = static_cast<int64_t>(stalls.size());
    if (!stalls.empty()) {
      s.mean_checkpoint_s = mean(stalls);
      s.max_checkpoint_s = *std::max_element(stalls.begin(), stalls.end());
    }
    s.skipped_steps.assign(skipped.begin(), skipped.end());
    s.starts = starts_;
    s.restarts = restarts_;
    s.preemptions = preemptions_;
    s.nonfinite_stop_step = nonfinite_stop_;
    return s;
  }

 private:
  void read_event(const Json& record) {
    const std::string kind = text_or(record, "event", "");
    if (kind == "start") {
      const int64_t step = record.contains("step") ? integer(record, "step") : 0;
      ++starts_;
      // The job resumed from step's checkpoint: what the previous attempt recorded after it is replayed
      // (or was lost) and is not part of the final model's history.
      erase_after(steps_, step);
      erase_after(checkpoint_s_, step);
      erase_after(val_, step);
      erase_after(nonfinite_skips_, step);
      if (restart_awaits_start_) restarts_.back().resumed_step = step;
      restart_awaits_start_ = false;
      nonfinite_stop_.reset();
      next_is_warmup_ = true;
    } else if (kind == "restart") {
      RestartRecord r;
      r.attempt = record.contains("attempt") ? integer(record, "attempt")
                                             : static_cast<int64_t>(restarts_.size()) + 1;
      r.failed_rank = record.contains("failed_rank") ? integer(record, "failed_rank") : -1;
      r.reason = text_or(record, "reason", "");
      restarts_.push_back(r);
      restart_awaits_start_ = true;
    } else if (kind == "preempted") {
      preemptions_.push_back(integer(record, "step"));
    } else if (kind == "nonfinite") {
      const int64_t step = integer(record, "step");
      if (text_or(record, "action", "skip") == "stop")
        nonfinite_stop_ = step;
      else
        nonfinite_skips_.insert(step);
    }
  }

  std::map<int64_t, StepRecord> steps_;
  std::map<int64_t, double> checkpoint_s_;
  std::map<int64_t, ValRecord> val_;
  std::set<int64_t> nonfinite_skips_;
  bool next_is_warmup_ = true;  // logs from before "start" events begin with the first start's step
  int64_t starts_ = 0;
  std::vector<RestartRecord> restarts_;
  bool restart_awaits_start_ = false;
  std::vector<int64_t> preemptions_;
  std::optional<int64_t> nonfinite_stop_;
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// ---------------------------------------------------------------------------------------------
// The table

std::string loss_at(const LossPoint& p) {
  return formatted("%.4f (step %lld)", p.loss, static_cast<long long>(p.step));
}

std::string duration(double seconds) {
  // A damaged log can sum to anything: only a plausible time is cast and split into h/m/s.
  if (!(seconds < 1e12)) return formatted("%.3g s", seconds);
  if (seconds < 60.0) return formatted("%.1f s", seconds);
  const auto whole = static_cast<long long>(seconds);
  if (seconds < 3600.0) return formatted("%lldm %02llds", whole / 60, whole % 60);
  return formatted("%lldh %02lldm %02llds", whole / 3600, whole / 60 % 60, whole % 60);
}

// "7, 12, 30" -- the first few, then how many more.
std::string step_list(const std::vector<int64_t>& steps) {
  constexpr size_t kShown = 10;
  std::string list;
  for (size_t i = 0; i < std::min(steps.size(), kShown); ++i)
    list += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > kShown) list += formatted(", ... (%zu more)", steps.size() - kShown);
  return list;
}

std::string counted_steps(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "0";
  return std::to_string(steps.size()) + (steps.size() == 1 ? " (step " : " (steps ") + step_list(steps) + ")";
}

std::string restart_line(const RestartRecord& r) {
  std::string line = formatted("attempt %lld: ", static_cast<long long>(r.attempt));
  line += r.failed_rank >= 0 ? formatted("rank %lld failed", static_cast<long long>(r.failed_rank))
                             : std::string("a rank failed");
  if (!r.reason.empty()) line += " (" + r.reason + ")";
  if (r.resumed_step) line += formatted(", resumed at step %lld", static_cast<long long>(*r.resumed_step));
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

RunSummary summarize_metrics(std::istream& jsonl, const std::string& source) {
  MetricsReader reader;
  std::vector<std::pair<int64_t, std::string>> bad;  // line number, why
  int64_t number = 0, last = 0;
  for (std::string line; std::getline(jsonl, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    last = number;
    try {
      reader.read(parse_line(line));
    } catch (const Json::exception& e) {
      bad.emplace_back(number, e.what());
    } catch (const BadLine& e) {
      bad.emplace_back(number, e.what());
    }
  }
  RunSummary summary = reader.summary();
  for (const auto& [line, why] : bad)
    summary.notes.push_back(
        line == last
            ? formatted("%s line %lld is cut short (the run was writing it when it stopped); ignored",
                        source.c_str(), static_cast<long long>(line))
            : formatted("%s line %lld is not a record (%s); ignored", source.c_str(),
                        static_cast<long long>(line), why.c_str()));
  return summary;
}

RunSummary summarize_run(const std::string& run_dir) {
  namespace fs = std::filesystem;
  // A path that is not a run directory is bad input (exit 2); a run directory that cannot be read
  // is a runtime error.
  if (!fs::exists(run_dir))
    throw std::invalid_argument("report: run directory " + run_dir +
                                " does not exist; pass the run.dir of the run's config");
  if (!fs::is_directory(run_dir))
    throw std::invalid_argument("report: " + run_dir +
                                " is not a directory; pass the run directory (run.dir of the config)");
  const std::string metrics = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!fs::exists(metrics))
    throw std::invalid_argument("report: " + run_dir +
                                " has no metrics.jsonl; is it a run directory (run.dir of the config)?");
  std::ifstream in(metrics);
  if (!in) throw std::runtime_error("report: cannot read " + metrics + "; check its permissions");
  RunSummary summary = summarize_metrics(in, metrics);
  if (summary.train_loss.empty())
    throw std::runtime_error("report: " + metrics +
                             " has no step records; the run has not completed a step yet: wait for its "
                             "first step, or check its log for why it stopped");
  summary.run_dir = run_dir;
  const std::string config_path = (fs::path(run_dir) / "config.yaml").string();
  if (fs::exists(config_path)) {
    try {
      const runtime::Config config = runtime::load_config(config_path);
      int64_t tokens = 0;  // a damaged log's step count must not overflow it
      if (!__builtin_mul_overflow(summary.steps, int64_t{config.train.global_batch}, &tokens) &&
          !__builtin_mul_overflow(tokens, int64_t{config.model.seq}, &tokens))
        summary.tokens = tokens;
    } catch (const std::exception& e) {  // e.g. written by another version; the rest still stands
      summary.notes.push_back(config_path + " does not read (" + first_line(e.what()) + "); tokens omitted");
    }
  }
  return summary;
}

std::string summary_table(const RunSummary& s) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (!s.run_dir.empty()) rows.emplace_back("run", s.run_dir);
  rows.emplace_back("steps completed", std::to_string(s.steps));
  if (s.tokens) rows.emplace_back("tokens", runtime::with_commas(*s.tokens));
  if (s.first_loss && s.final_loss)
    rows.emplace_back("training loss",
                      "first " + loss_at(*s.first_loss) + ", final " + loss_at(*s.final_loss));
  rows.emplace_back("validation loss",
                    s.final_val_loss
                        ? "final " + loss_at(*s.final_val_loss) +
                              (s.best_val_loss ? ", best " + loss_at(*s.best_val_loss) : std::string())
                        : std::string("none recorded"));
  if (!s.val_loss_outer.empty())
    rows.emplace_back("validation loss (outer)", "final " + loss_at(s.val_loss_outer.back()));
  if (s.median_tokens_per_s && s.mean_tokens_per_s && s.mean_mfu) {
    rows.emplace_back(
        "tokens/s",
        formatted("median %.0f, mean %.0f over %lld steps (first after each start left out)",
                  *s.median_tokens_per_s, *s.mean_tokens_per_s, static_cast<long long>(s.throughput_steps)));
    rows.emplace_back("MFU", formatted("mean %.1f%%", 100.0 * *s.mean_mfu));
  } else {
    rows.emplace_back("tokens/s", "n/a (no step after the first of a start)");
  }
  rows.emplace_back("training time", duration(s.train_seconds) + " (sum of step times)");
  std::string restarts = std::to_string(s.restarts.size());
  for (const RestartRecord& r : s.restarts) restarts += "\n" + restart_line(r);
  rows.emplace_back("restarts", restarts);
  rows.emplace_back("preemptions", counted_steps(s.preemptions));
  rows.emplace_back("skipped steps", counted_steps(s.skipped_steps));
  if (s.nonfinite_stop_step)
    rows.emplace_back("stopped", formatted("at step %lld on a non-finite loss or gradient",
                                           static_cast<long long>(*s.nonfinite_stop_step)));
  rows.emplace_back("checkpoints", s.checkpoints == 0
                                       ? std::string("0")
                                       : formatted("%lld written; training blocked %.3f s mean, %.3f s max",
                                                   static_cast<long long>(s.checkpoints), s.mean_checkpoint_s,
                                                   s.max_checkpoint_s));
  rows.emplace_back("checkpoint wait",
                    formatted("%.3f s in all (steps blocked on a checkpoint snapshot)", s.checkpoint_wait_s));
  if (s.kv_wait_s)
    rows.emplace_back(
        "K/V wait",
        formatted("%.3f s in all (context parallelism: steps blocked on the ring's K/V)", *s.kv_wait_s));
  for (const std::string& note : s.notes) rows.emplace_back("note", note);

  size_t width = 0;
  for (const auto& [name, value] : rows) width = std::max(width, name.size());
  std::string table;
  for (const auto& [name, value] : rows) {
    std::string label = name + std::string(width + 2 - name.size(), ' ');
    size_t begin = 0;
    do {  // continuation lines of a multi-line value line up under its first
      const size_t end = value.find('\n', begin);
      table += label + value.substr(begin, end == std::string::npos ? end : end - begin) + "\n";
      label.assign(width + 2, ' ');
      begin = end == std::string::npos ? end : end + 1;
    } while (begin != std::string::npos);
  }
  return table;
}

}  // namespace atl::launcher
