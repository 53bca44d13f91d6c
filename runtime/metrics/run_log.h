// Rank 0's record of a run: the console (progress display and lines), metrics.jsonl and TensorBoard,
// written from the events the training loop reports. On every other rank each call records nothing.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "runtime/config/config.h"
#include "runtime/metrics/console_lines.h"
#include "runtime/metrics/data_lines.h"
#include "runtime/metrics/metrics.h"
#include "runtime/metrics/progress_display.h"
#include "runtime/metrics/tensorboard.h"

namespace atl::runtime {

class RunLog {
 public:
  // `out`: rank 0's console (null: quiet, and on every other rank). `progress_bar`: redraw a bar
  // after each step (launch_environment.h). `verbose`: the resolved config's table and the rank
  // table on the console too, not only in run.dir. Nothing is written to run.dir until open().
  RunLog(const Config& config, std::ostream* out, bool progress_bar, bool verbose = false);
  // On rank 0 (`is_logger`): creates run.dir, saves config.yaml and the resolved config's table
  // (config.txt) there, opens metrics.jsonl and the TensorBoard directory. `flops_per_token` and
  // `peak_flops` (per rank, over `ranks`) give MFU.
  void open(bool is_logger, double flops_per_token, double peak_flops, int ranks);
  // After open(), the start-up summary: the layout, the data (what the run reads of each training
  // dataset, data_lines), the steps and the checkpoint policy, and where the whole config is. `rank_table`:
  // where each rank runs, written to run.dir/ranks.txt (and on the console under `verbose`).
  void summary(int world_size, const std::vector<DatasetUse>& train, const std::string& rank_table);
  bool verbose() const { return verbose_; }
  // On a GPU named `gpu_name`, before start(): its datasheet's dense bf16 peak, written beside the
  // measured one in the start record (MFU stays against the measured peak, which the run can
  // actually reach), and on the console the bf16 and TF32 matmul peaks measured on `device` -- only
  // printed, so a rank without a console does not measure them. `measured_peak`: the MFU peak when
  // the start-up probe measured it (none when run.mfu_peak_tflops gave it), in `precision`.
  void gpu_peaks(const std::string& gpu_name, const c10::Device& device, std::optional<double> measured_peak,
                 Precision precision);

  void line(const std::string& text) const;  // the console only
  bool quiet() const { return !display_; }   // no console: line() prints nothing
  void start(int64_t step, int world_size);
  // After each step: its record and scalars, and the progress bar.
  void step(const StepMetrics& m);
  // A step with a non-finite loss or gradient norm: its event, and for a skipped update a line.
  void nonfinite(const StepMetrics& m);
  // Every log_every steps and after the last: the progress line, with the mean throughput of the
  // steps since the last one (the first step, which pays one-time costs, left out).
  void progress(StepMetrics m);
  void checkpoint(int64_t step, const std::string& dir, double seconds);
  // Islands with a membership per round: `event` (island_joined, island_dropped, caught_up, sat_out)
  // of island `island` at the round ending at `step`, as a metrics event and a line.
  void island_event(int64_t step, const std::string& event, int island);
  // Island `island`'s pseudo-gradient of norm `norm` exceeded outer.max_pseudo_grad_norm and was left
  // out of the mean applied at `step`: an island_left_out event and a line.
  void pseudo_gradient_left_out(int64_t step, int island, double norm);
  void validation(int64_t step, double val_loss, const std::optional<IslandValidation>& islands);
  // The run ended at `step` with train.steps done: one closing line (steps and tokens this run,
  // wall time, the last train and validation loss, the last checkpoint `committed`, empty: none)
  // and an "end" event.
  // `checkpoint_costs`: a line of what the checkpoints cost (TrainerCheckpoints::costs_line), if any.
  void finished(int64_t step, const std::string& committed, const std::string& checkpoint_costs);
  // A run resumed at `step` >= train.steps: nothing to train.
  void already_complete(int64_t step);
  // `signal` ended the run at `step` (`signal_text`: its name) after `dir` was committed.
  void preempted(int64_t step, int signal, const std::string& signal_text, const std::string& dir);
  // train.sample_every: the prompt and what the model wrote after it (metrics.jsonl event "sample").
  void sample(int64_t step, const std::string& prompt, const std::string& text);

 private:
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  const Config& config_;
  std::unique_ptr<ProgressDisplay> display_;        // null: quiet
  std::unique_ptr<MetricsLog> metrics_;             // disabled (empty path) on other ranks
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0
  double flops_per_token_ = 0.0, peak_flops_ = 0.0;
  std::optional<double> datasheet_peak_flops_;
  int ranks_ = 1;
  bool verbose_ = false;
  bool logger_ = false;  // rank 0, which writes run.dir's files
  int64_t skipped_steps_ = 0;
  // For the closing line: where this run started, the newest losses and checkpoint.
  int64_t first_step_ = 0;
  double start_seconds_ = 0.0;  // steady clock at start()
  std::optional<double> last_loss_, last_val_loss_;
  std::string last_checkpoint_;
  double interval_tokens_per_s_ = 0.0;  // summed over the steps since the last progress line
  int interval_steps_ = 0;
};

// Fraction of `peak_flops_per_rank` x `ranks` that `tokens_per_s` of training at `flops_per_token`
// uses.
double model_flops_utilization(double tokens_per_s, double flops_per_token, double peak_flops_per_rank,
                               int ranks);

}  // namespace atl::runtime
