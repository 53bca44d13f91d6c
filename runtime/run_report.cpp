#include "runtime/run_report.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "runtime/config.h"

namespace atl::runtime {
namespace {

__attribute__((format(printf, 1, 2))) std::string format(const char* fmt, ...) {
  va_list args, copy;
  va_start(args, fmt);
  va_copy(copy, args);
  const int length = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string text(static_cast<size_t>(std::max(length, 0)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, fmt, copy);
  va_end(copy);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Reading metrics.jsonl

// A line that holds no readable record; the reader turns it into a note.
struct BadLine : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// %.17g writes nan, -nan, inf and -inf, which YAML's number rules do not read; strtod does.
double number(const YAML::Node& record, const char* key) {
  const YAML::Node value = record[key];
  const std::string text = value.IsScalar() ? value.Scalar() : "";
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') throw BadLine(std::string("\"") + key + "\" is not a number");
  return parsed;
}

double number_or(const YAML::Node& record, const char* key, double fallback) {
  return record[key] ? number(record, key) : fallback;
}

int64_t integer(const YAML::Node& record, const char* key) {
  return static_cast<int64_t>(std::llround(number(record, key)));
}

std::string text_or(const YAML::Node& record, const char* key, const std::string& fallback) {
  const YAML::Node value = record[key];
  return value && value.IsScalar() ? value.Scalar() : fallback;
}

struct StepRecord {
  double loss = 0.0, tokens_per_s = 0.0, mfu = 0.0, step_s = 0.0, checkpoint_wait_s = 0.0;
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
  void read(const YAML::Node& record) {
    if (!record.IsMap()) throw BadLine("not a JSON object");
    if (record["event"]) return read_event(record);
    if (!record["step"]) return;  // a kind this reader does not know: newer runtimes may add some
    const int64_t step = integer(record, "step");
    if (record["loss"]) {
      StepRecord r;
      r.loss = number(record, "loss");
      r.tokens_per_s = number_or(record, "tokens_per_s", 0.0);
      r.mfu = number_or(record, "mfu", 0.0);
      r.step_s = number_or(record, "step_s", 0.0);
      r.checkpoint_wait_s = number_or(record, "checkpoint_wait_s", 0.0);
      const std::string skipped = text_or(record, "skipped", "0");  // 1 as written; true read alike
      r.skipped = skipped != "0" && skipped != "false";
      r.warmup = next_is_warmup_;
      steps_[step] = r;
      next_is_warmup_ = false;
    } else if (record["checkpoint_s"]) {
      checkpoint_s_[step] = number(record, "checkpoint_s");
    } else if (record["val_loss"]) {
      ValRecord v;
      v.loss = number(record, "val_loss");
      if (record["val_loss_outer"]) v.outer = number(record, "val_loss_outer");
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
  void read_event(const YAML::Node& record) {
    const std::string kind = text_or(record, "event", "");
    if (kind == "start") {
      const int64_t step = record["step"] ? integer(record, "step") : 0;
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
      r.attempt = record["attempt"] ? integer(record, "attempt") : static_cast<int64_t>(restarts_.size()) + 1;
      r.failed_rank = record["failed_rank"] ? integer(record, "failed_rank") : -1;
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
  return format("%.4f (step %lld)", p.loss, static_cast<long long>(p.step));
}

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > (value < 0 ? 1 : 0); i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

std::string duration(double seconds) {
  if (seconds < 60.0) return format("%.1f s", seconds);
  const auto whole = static_cast<long long>(seconds);
  if (seconds < 3600.0) return format("%lldm %02llds", whole / 60, whole % 60);
  return format("%lldh %02lldm %02llds", whole / 3600, whole / 60 % 60, whole % 60);
}

// "7, 12, 30" -- the first few, then how many more.
std::string step_list(const std::vector<int64_t>& steps) {
  constexpr size_t kShown = 10;
  std::string list;
  for (size_t i = 0; i < std::min(steps.size(), kShown); ++i)
    list += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > kShown) list += format(", ... (%zu more)", steps.size() - kShown);
  return list;
}

std::string counted_steps(const std::vector<int64_t>& steps) {
  if (steps.empty()) return "0";
  return std::to_string(steps.size()) + (steps.size() == 1 ? " (step " : " (steps ") + step_list(steps) + ")";
}

std::string restart_line(const RestartRecord& r) {
  std::string line = format("attempt %lld: ", static_cast<long long>(r.attempt));
  line += r.failed_rank >= 0 ? format("rank %lld failed", static_cast<long long>(r.failed_rank))
                             : std::string("a rank failed");
  if (!r.reason.empty()) line += " (" + r.reason + ")";
  if (r.resumed_step) line += format(", resumed at step %lld", static_cast<long long>(*r.resumed_step));
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

// ---------------------------------------------------------------------------------------------
// The SVG plot

std::string xml_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// An axis over [lo, hi] widened to multiples of a 1-2-5 tick spacing, about five ticks.
struct Axis {
  double lo = 0.0, hi = 1.0, tick = 0.2;

  Axis(double data_lo, double data_hi, bool integral) {
    if (!(data_hi > data_lo)) {  // one value (or none): centre it in a range of its own size
      const double half = integral ? 1.0 : std::max(0.5, 0.1 * std::abs(data_lo));
      data_lo -= half;
      data_hi += half;
    } else if (!integral) {  // keep the extreme values off the frame
      const double margin = 0.03 * (data_hi - data_lo);
      data_lo -= margin;
      data_hi += margin;
    }
    const double raw = (data_hi - data_lo) / 5.0;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double r = raw / magnitude;
    tick = magnitude * (r < 1.5 ? 1.0 : r < 3.0 ? 2.0 : r < 7.0 ? 5.0 : 10.0);
    if (integral) tick = std::max(tick, 1.0);
    lo = std::floor(data_lo / tick) * tick;
    hi = std::ceil(data_hi / tick) * tick;
  }
  std::vector<double> ticks() const {
    std::vector<double> values;
    for (int64_t k = std::llround(lo / tick); k * tick <= hi + 1e-9 * tick; ++k) values.push_back(k * tick);
    return values;
  }
};

// Pixel geometry of the plot area inside the SVG canvas.
struct Frame {
  static constexpr double kWidth = 800, kHeight = 450;
  static constexpr double kLeft = 70, kRight = 780, kTop = 40, kBottom = 395;
  Axis x, y;
  double px(double step) const { return kLeft + (step - x.lo) / (x.hi - x.lo) * (kRight - kLeft); }
  double py(double loss) const { return kBottom - (loss - y.lo) / (y.hi - y.lo) * (kBottom - kTop); }
};

constexpr const char* kTrainColour = "#1f77b4";
constexpr const char* kValColour = "#d62728";
constexpr const char* kOuterColour = "#2ca02c";
constexpr const char* kRestartColour = "#7f7f7f";
constexpr const char* kPreemptColour = "#ff7f0e";
constexpr const char* kSkipColour = "#9467bd";

std::vector<LossPoint> finite(const std::vector<LossPoint>& points) {
  std::vector<LossPoint> kept;
  std::copy_if(points.begin(), points.end(), std::back_inserter(kept),
               [](const LossPoint& p) { return std::isfinite(p.loss); });
  return kept;
}

Frame frame_for(const RunSummary& s, const std::vector<std::vector<LossPoint>>& series) {
  double step_lo = INFINITY, step_hi = -INFINITY, loss_lo = INFINITY, loss_hi = -INFINITY;
  for (const std::vector<LossPoint>& points : series)
    for (const LossPoint& p : points) {
      step_lo = std::min(step_lo, static_cast<double>(p.step));
      step_hi = std::max(step_hi, static_cast<double>(p.step));
      loss_lo = std::min(loss_lo, p.loss);
      loss_hi = std::max(loss_hi, p.loss);
    }
  if (step_lo > step_hi) step_lo = step_hi = static_cast<double>(s.steps);  // nothing finite to plot
  if (loss_lo > loss_hi) loss_lo = loss_hi = 0.0;
  return Frame{Axis(std::min(step_lo, 0.0), step_hi, true), Axis(loss_lo, loss_hi, false)};
}

std::string axes(const Frame& f) {
  std::string svg;
  for (double t : f.x.ticks()) {
    svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", f.px(t),
                  Frame::kTop, f.px(t), Frame::kBottom);
    svg += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", f.px(t),
                  Frame::kBottom + 16, t);
  }
  for (double t : f.y.ticks()) {
    svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
                  Frame::kLeft, f.py(t), Frame::kRight, f.py(t));
    svg += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", Frame::kLeft - 6,
                  f.py(t) + 4, t);
  }
  svg +=
      format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
             Frame::kLeft, Frame::kTop, Frame::kRight - Frame::kLeft, Frame::kBottom - Frame::kTop);
  svg += format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step</text>\n",
                (Frame::kLeft + Frame::kRight) / 2, Frame::kHeight - 18);
  svg += format(
      "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">loss</text>\n",
      (Frame::kTop + Frame::kBottom) / 2, (Frame::kTop + Frame::kBottom) / 2);
  return svg;
}

// `name` becomes the element's class, so that readers (and tests) can tell the series apart.
std::string polyline(const Frame& f, const std::vector<LossPoint>& points, const char* name,
                     const char* colour, const char* extra) {
  if (points.empty()) return "";
  std::string coords;
  for (const LossPoint& p : points)
    coords +=
        format("%s%.1f,%.1f", coords.empty() ? "" : " ", f.px(static_cast<double>(p.step)), f.py(p.loss));
  return format("<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"%s\"/>\n",
                name, colour, extra, coords.c_str());
}

std::string dots(const Frame& f, const std::vector<LossPoint>& points, const char* colour) {
  std::string svg;
  for (const LossPoint& p : points)
    svg += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                  f.px(static_cast<double>(p.step)), f.py(p.loss), colour);
  return svg;
}

std::string marker(const Frame& f, int64_t step, const char* colour, const char* label) {
  const double x = f.px(static_cast<double>(step));
  if (x < Frame::kLeft || x > Frame::kRight) return "";
  const bool right_half = x > (Frame::kLeft + Frame::kRight) / 2;  // label inside the frame
  return format(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"5,4\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" font-size=\"10\" text-anchor=\"%s\">%s</text>\n",
      x, Frame::kTop, x, Frame::kBottom, colour, right_half ? x - 3 : x + 3, Frame::kBottom - 6, colour,
      right_half ? "end" : "start", label);
}

struct LegendEntry {
  const char* colour;
  const char* label;
  const char* dash;  // "" for a solid line
  bool dot = false;  // a dot instead of a line
};

std::string legend(const std::vector<LegendEntry>& entries) {
  const double width = 190, row = 18, x = Frame::kRight - width - 8, y = Frame::kTop + 8;
  std::string svg = format(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"white\" fill-opacity=\"0.9\" "
      "stroke=\"#999\"/>\n",
      x, y, width, row * static_cast<double>(entries.size()) + 8);
  for (size_t i = 0; i < entries.size(); ++i) {
    const double cy = y + 4 + row * (static_cast<double>(i) + 0.5);
    if (entries[i].dot)
      svg += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x + 20, cy, entries[i].colour);
    else
      svg += format(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n",
          x + 8, cy, x + 32, cy, entries[i].colour,
          *entries[i].dash ? format(" stroke-dasharray=\"%s\"", entries[i].dash).c_str() : "");
    svg += format("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 40, cy + 4, entries[i].label);
  }
  return svg;
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
      reader.read(YAML::Load(line));
    } catch (const YAML::Exception& e) {
      bad.emplace_back(number, e.msg);
    } catch (const BadLine& e) {
      bad.emplace_back(number, e.what());
    }
  }
  RunSummary summary = reader.summary();
  for (const auto& [line, why] : bad)
    summary.notes.push_back(
        line == last ? format("%s line %lld is cut short (the run was writing it when it stopped); ignored",
                              source.c_str(), static_cast<long long>(line))
                     : format("%s line %lld is not a record (%s); ignored", source.c_str(),
                              static_cast<long long>(line), why.c_str()));
  return summary;
}

RunSummary summarize_run(const std::string& run_dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(run_dir))
    throw std::runtime_error("report: run directory " + run_dir +
                             " does not exist; pass the run.dir of the run's config");
  if (!fs::is_directory(run_dir))
    throw std::runtime_error("report: " + run_dir +
                             " is not a directory; pass the run directory (run.dir of the config)");
  const std::string metrics = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!fs::exists(metrics))
    throw std::runtime_error("report: " + run_dir +
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
      const Config config = load_config(config_path);
      summary.tokens = summary.steps * config.train.global_batch * config.model.seq;
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
  if (s.tokens) rows.emplace_back("tokens", with_commas(*s.tokens));
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
        format("median %.0f, mean %.0f over %lld steps (first after each start left out)",
               *s.median_tokens_per_s, *s.mean_tokens_per_s, static_cast<long long>(s.throughput_steps)));
    rows.emplace_back("MFU", format("mean %.1f%%", 100.0 * *s.mean_mfu));
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
    rows.emplace_back("stopped", format("at step %lld on a non-finite loss or gradient",
                                        static_cast<long long>(*s.nonfinite_stop_step)));
  rows.emplace_back("checkpoints", s.checkpoints == 0
                                       ? std::string("0")
                                       : format("%lld written; training blocked %.3f s mean, %.3f s max",
                                                static_cast<long long>(s.checkpoints), s.mean_checkpoint_s,
                                                s.max_checkpoint_s));
  rows.emplace_back("checkpoint wait",
                    format("%.3f s in all (steps blocked on a checkpoint snapshot)", s.checkpoint_wait_s));
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

std::string loss_curve_svg(const RunSummary& s) {
  const std::vector<LossPoint> train = finite(s.train_loss), val = finite(s.val_loss),
                               outer = finite(s.val_loss_outer);
  const Frame f = frame_for(s, {train, val, outer});
  std::string svg = format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">loss: %s</text>\n",
      Frame::kWidth, Frame::kHeight, Frame::kWidth, Frame::kHeight, (Frame::kLeft + Frame::kRight) / 2,
      xml_escaped(s.run_dir.empty() ? "run" : s.run_dir).c_str());
  svg += axes(f);

  std::vector<LegendEntry> entries{{kTrainColour, "training loss", ""}};
  bool restarted = false;
  for (const RestartRecord& r : s.restarts)
    if (r.resumed_step) {
      svg += marker(f, *r.resumed_step, kRestartColour, "restart");
      restarted = true;
    }
  for (int64_t step : s.preemptions) svg += marker(f, step, kPreemptColour, "preempted");

  svg += polyline(f, train, "train-loss", kTrainColour, "");
  if (train.size() == 1) svg += dots(f, train, kTrainColour);  // a one-point polyline draws nothing
  if (!val.empty()) {
    svg += polyline(f, val, "val-loss", kValColour, "") + dots(f, val, kValColour);
    entries.push_back({kValColour, "validation loss", ""});
  }
  if (!outer.empty()) {
    svg += polyline(f, outer, "val-loss-outer", kOuterColour, " stroke-dasharray=\"6,3\"") +
           dots(f, outer, kOuterColour);
    entries.push_back({kOuterColour, "validation loss (outer)", "6,3"});
  }
  if (!s.skipped_steps.empty()) {
    std::vector<LossPoint> skipped;  // on the curve where the loss is finite, else along the top edge
    for (int64_t step : s.skipped_steps) {
      const auto at =
          std::find_if(train.begin(), train.end(), [&](const LossPoint& p) { return p.step == step; });
      skipped.push_back({step, at != train.end() ? at->loss : f.y.hi});
    }
    svg += dots(f, skipped, kSkipColour);
    entries.push_back({kSkipColour, "skipped update", "", true});
  }
  if (restarted) entries.push_back({kRestartColour, "restart (resumed step)", "5,4"});
  if (!s.preemptions.empty()) entries.push_back({kPreemptColour, "preempted", "5,4"});
  if (train.empty())
    svg +=
        format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no finite training loss to plot</text>\n",
               (Frame::kLeft + Frame::kRight) / 2, (Frame::kTop + Frame::kBottom) / 2);
  svg += legend(entries);
  return svg + "</svg>\n";
}

}  // namespace atl::runtime
