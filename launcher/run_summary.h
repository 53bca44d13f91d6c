// `atoll report`, the reading half: what a run's metrics.jsonl says about it -- progress, losses,
// throughput, restarts, preemptions, skipped updates, checkpoint stalls -- and that summary as a
// two-column table (its loss curve is loss_plot.h). Works on finished, running and crashed runs alike:
// a torn last line (a write cut short by a crash) is ignored with a note.
//
// A restarted job replays the steps after its last checkpoint, so the log can hold a step twice. The
// summary describes the history the final model came from: a "start" event resuming at step S drops
// what was recorded after S, and for the same step the last record wins.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace atl::launcher {

struct LossPoint {
  int64_t step = 0;
  double loss = 0.0;
};

// A launcher relaunch ({"event":"restart",...}).
struct RestartRecord {
  int64_t attempt = 0;
  int64_t failed_rank = -1;
  std::string reason;
  std::optional<int64_t> resumed_step;  // the step the next "start" event resumed from, if one followed
};

struct RunSummary {
  std::string run_dir;
  int64_t steps = 0;              // the highest step completed
  std::optional<int64_t> tokens;  // steps x train.global_batch x model.seq; needs <run dir>/config.yaml

  std::vector<LossPoint> train_loss;      // one per step, ascending (non-finite values included)
  std::vector<LossPoint> val_loss;        // one per evaluation, ascending
  std::vector<LossPoint> val_loss_outer;  // phi's, with an outer optimizer
  std::optional<LossPoint> first_loss, final_loss;
  std::optional<LossPoint> final_val_loss, best_val_loss;  // best: the lowest finite one

  // Over the steps that were not the first after a (re)start (allocator and cache warm-up).
  std::optional<double> median_tokens_per_s, mean_tokens_per_s, mean_mfu;
  int64_t throughput_steps = 0;  // steps those cover
  double train_seconds = 0.0;    // sum of step_s

  int64_t starts = 0;  // "start" events: the job's first start and every resume
  std::vector<RestartRecord> restarts;
  std::vector<int64_t> preemptions;            // the steps the job was preempted at
  std::vector<int64_t> skipped_steps;          // updates skipped on a non-finite loss or gradient
  std::optional<int64_t> nonfinite_stop_step;  // the last attempt stopped on a non-finite value here

  int64_t checkpoints = 0;                                 // checkpoints written (one record each)
  double mean_checkpoint_s = 0.0, max_checkpoint_s = 0.0;  // the loop blocked saving one
  double checkpoint_wait_s = 0.0;  // total time steps blocked on a lazy checkpoint's snapshot
  // Context parallelism: total time rank 0's steps blocked on the ring's K/V (none without cp).
  std::optional<double> kv_wait_s;

  std::vector<std::string> notes;  // lines ignored and why, a config.yaml that could not be read
};

// Reads metrics.jsonl lines (`source` names them in notes). Leaves run_dir and tokens unset; an empty
// train_loss means the log holds no step record.
RunSummary summarize_metrics(std::istream& jsonl, const std::string& source = "metrics.jsonl");

// <run_dir>/metrics.jsonl, with tokens from <run_dir>/config.yaml when it reads. Throws
// std::runtime_error (one line naming the problem and the fix) when run_dir or its metrics.jsonl is
// missing or the log holds no step record.
RunSummary summarize_run(const std::string& run_dir);

// "name   value" rows, the values aligned; multi-line values are indented to the value column.
std::string summary_table(const RunSummary& summary);

}  // namespace atl::launcher
