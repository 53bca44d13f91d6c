// `atoll report`: a run directory's metrics.jsonl (torn last lines, replayed steps, old logs with
// bare nan/inf) and its config.yaml, summarised and drawn as a loss curve. The input is a set of
// files (fuzz_input.h's split_files): metrics.jsonl and config.yaml.
#include "launcher/loss_plot.h"
#include "launcher/run_summary.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string dir = scratch.hold_files(data, size);
  atl::fuzz::expect_clean(
      [&] {
        const atl::launcher::RunSummary summary = atl::launcher::summarize_run(dir);
        atl::launcher::summary_table(summary);
        atl::launcher::loss_curve_svg(summary);
      },
      {atl::fuzz::Rejection::kRuntimeError, atl::fuzz::Rejection::kInvalidArgument});
  return 0;
}
