// `atoll report RUN_DIR [--out FILE.svg]`: a run's summary table (runtime/run_report.h) -- finished,
// still running or crashed -- and its loss curve as an SVG, <run dir>/loss.svg unless --out names one.
// Reads only files, so it runs anywhere, without MPI.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "launcher/commands.h"
#include "runtime/run_report.h"

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
  const runtime::RunSummary summary = runtime::summarize_run(parsed.run_dir);
  std::ofstream svg(parsed.out);  // opened first: a bad --out fails before the table is printed
  if (!svg)
    throw std::runtime_error("report: cannot write " + parsed.out +
                             "; pass a writable path with --out FILE.svg");
  std::cout << runtime::summary_table(summary);
  svg << runtime::loss_curve_svg(summary);
  svg.close();
  if (!svg) throw std::runtime_error("report: cannot write " + parsed.out + "; check the disk space");
  std::cout << "loss curve: " << parsed.out << "\n";
  return 0;
}

}  // namespace atl::launcher
