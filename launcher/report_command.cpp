// `atoll report RUN_DIR [--out FILE.svg]`: a run's summary table (runtime/run_report.h) -- finished,
// still running or crashed -- and its loss curve as an SVG, <run dir>/loss.svg unless --out names one.
// Reads only files, so it runs anywhere, without MPI.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>

#include "launcher/commands.h"
#include "launcher/loss_plot.h"
#include "launcher/run_summary.h"
#include "runtime/metrics/tensorboard.h"

namespace atl::launcher {
namespace {

constexpr const char* kReportUsage = "atoll report RUN_DIR [--out FILE.svg]";

struct ReportArgs {
  std::string run_dir;
  std::string out;  // empty: <run dir>/loss.svg
};

ReportArgs parse_report_args(const Args& args) {
  ReportArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--out") {
      if (i + 1 >= args.size())
        throw std::invalid_argument("--out needs a file name; usage: " + std::string(kReportUsage));
      parsed.out = args[++i];
    } else if (a.rfind("--out=", 0) == 0) {
      parsed.out = a.substr(6);
    } else if (a.rfind("-", 0) == 0) {
      throw std::invalid_argument("unknown option '" + a + "'; usage: " + kReportUsage);
    } else if (parsed.run_dir.empty()) {
      parsed.run_dir = a;
    } else {
      throw std::invalid_argument("unexpected argument '" + a + "'; usage: " + kReportUsage);
    }
  }
  if (parsed.run_dir.empty())
    throw std::invalid_argument("missing RUN_DIR; usage: " + std::string(kReportUsage));
  if (parsed.out.empty()) parsed.out = (std::filesystem::path(parsed.run_dir) / "loss.svg").string();
  return parsed;
}

// One line on <run dir>/tb/: every record's framing CRCs verified, and its train/loss scalars equal to
// metrics.jsonl's losses (as float; for a replayed step the last value wins in both).
std::string tensorboard_check(const std::string& run_dir, const RunSummary& summary) {
  const std::string dir = run_dir + "/tb";
  if (!std::filesystem::is_directory(dir)) return "tensorboard: none (no " + dir + ")";
  std::map<int64_t, float> losses;
  size_t scalars = 0;
  const std::vector<std::string> files = runtime::tensorboard_files(dir);
  for (const std::string& file : files)
    for (const runtime::ScalarEvent& e : runtime::read_tensorboard_scalars(file)) {
      ++scalars;
      if (e.tag == "train/loss") losses[e.step] = e.value;
    }
  size_t equal = 0;
  for (const LossPoint& p : summary.train_loss) {
    const auto it = losses.find(p.step);
    const float expected = static_cast<float>(p.loss);
    if (it == losses.end() || !(it->second == expected || (std::isnan(it->second) && std::isnan(expected))))
      throw std::runtime_error("report: " + dir + " has train/loss " +
                               (it == losses.end() ? std::string("missing") : std::to_string(it->second)) +
                               " at step " + std::to_string(p.step) + " but metrics.jsonl has " +
                               std::to_string(p.loss) + "; the TensorBoard files are not this run's");
    ++equal;
  }
  return "tensorboard: " + std::to_string(scalars) + " scalars in " + std::to_string(files.size()) +
         " file(s), every record's CRCs verified; train/loss equals metrics.jsonl at all " +
         std::to_string(equal) + " steps";
}

}  // namespace

int report_command(const Args& args) {
  if (wants_help(args)) {
    std::cout << "usage: " << kReportUsage
              << "\n\nSummarises the run in RUN_DIR (run.dir of its config) from its metrics.jsonl: steps, "
              << "tokens, losses, throughput, restarts, preemptions, skipped updates and checkpoint stalls.\n"
              << "Writes the loss curve as an SVG to FILE.svg (default RUN_DIR/loss.svg).\n";
    return 0;
  }
  const ReportArgs parsed = parse_report_args(args);
  const RunSummary summary = summarize_run(parsed.run_dir);
  std::ofstream svg(parsed.out);  // opened first: a bad --out fails before the table is printed
  if (!svg)
    throw std::runtime_error("report: cannot write " + parsed.out +
                             "; pass a writable path with --out FILE.svg");
  std::cout << summary_table(summary);
  svg << loss_curve_svg(summary);
  svg.close();
  if (!svg) throw std::runtime_error("report: cannot write " + parsed.out + "; check the disk space");
  std::cout << "loss curve: " << parsed.out << "\n" << tensorboard_check(parsed.run_dir, summary) << "\n";
  return 0;
}

}  // namespace atl::launcher
