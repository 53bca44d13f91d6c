#include "runtime/metrics/run_log.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/metrics/peak_flops.h"
#include "text/joined.h"

namespace atl::runtime {
namespace {

// The scalars TensorBoard shows for a step: the same values as its metrics.jsonl record.
std::vector<std::pair<std::string, double>> step_scalars(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> scalars{
      {"train/loss", m.loss},
      {"train/lr", m.lr},
      {"train/grad_norm", m.grad_norm},
      {"perf/tokens_per_s", m.tokens_per_s},
      {"perf/mfu", m.mfu},
      {"perf/step_s", m.step_seconds},
      {"comm/bytes", static_cast<double>(m.comm_bytes)},
      {"comm/tp_bytes", static_cast<double>(m.tp_bytes)},
      {"comm/dp_bytes", static_cast<double>(m.dp_bytes)},
      {"comm/pp_bytes", static_cast<double>(m.pp_bytes)},
      {"comm/wait_s", m.comm_wait_seconds},
      {"checkpoint/wait_s", m.checkpoint_wait_seconds},
      {"memory/rss_bytes", static_cast<double>(m.rss_bytes)},
      {"memory/param_bytes", static_cast<double>(m.param_bytes)},
      {"memory/grad_bytes", static_cast<double>(m.grad_bytes)},
      {"memory/optimizer_bytes", static_cast<double>(m.optimizer_bytes)},
      {"memory/activation_bytes", static_cast<double>(m.activation_bytes)}};
  if (m.gpu_memory) {
    scalars.emplace_back("memory/gpu_allocated_bytes", static_cast<double>(m.gpu_memory->allocated));
    scalars.emplace_back("memory/gpu_reserved_bytes", static_cast<double>(m.gpu_memory->reserved));
    scalars.emplace_back("memory/gpu_peak_bytes", static_cast<double>(m.gpu_memory->peak));
  }
  if (m.context_parallel) {
    scalars.emplace_back("comm/cp_bytes", static_cast<double>(m.cp_bytes));
    scalars.emplace_back("comm/kv_wait_s", m.kv_wait_seconds);
  }
  if (m.skipped) scalars.emplace_back("train/skipped", 1.0);
  if (m.islands) {
    scalars.emplace_back("outer/bytes", static_cast<double>(m.outer_bytes));
    scalars.emplace_back("outer/bytes_total", static_cast<double>(m.outer_bytes_total));
    scalars.emplace_back("outer/wait_s", m.outer_wait_seconds);
    scalars.emplace_back("outer/simulated_s", m.outer_simulated_seconds);
  }
  if (m.outer_islands > 0) scalars.emplace_back("outer/islands", static_cast<double>(m.outer_islands));
  return scalars;
}

}  // namespace

double model_flops_utilization(double tokens_per_s, double flops_per_token, double peak_flops_per_rank,
                               int ranks) {
  return tokens_per_s * flops_per_token / (peak_flops_per_rank * ranks);
}

namespace {

// The paths of a dataset list, as the summary names them.
std::string dataset_paths(const DatasetList& datasets) {
  std::vector<std::string> paths;
  for (const DatasetSource& d : datasets) paths.push_back(d.path);
  return text::joined(paths, " + ");
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

RunLog::RunLog(const Config& config, std::ostream* out, bool progress_bar, bool verbose)
    : config_(config), verbose_(verbose) {
  if (out) display_ = std::make_unique<ProgressDisplay>(out, progress_bar, config.train.steps);
}

void RunLog::open(bool is_logger, double flops_per_token, double peak_flops, int ranks) {
  flops_per_token_ = flops_per_token;
  peak_flops_ = peak_flops;
  ranks_ = ranks;
  logger_ = is_logger;
  if (is_logger) {
    std::filesystem::create_directories(config_.run.dir);
    std::ofstream(config_.run.dir + "/config.yaml") << config_to_yaml(config_);
    std::ofstream(config_.run.dir + "/config.txt") << config_table(config_) << "\n";
  }
  metrics_ = std::make_unique<MetricsLog>(is_logger ? config_.run.dir + "/metrics.jsonl" : "");
  if (is_logger) tensorboard_ = std::make_unique<TensorBoardWriter>(config_.run.dir + "/tb");
}

void RunLog::line(const std::string& text) const {
  if (display_) display_->line(text);
}

void RunLog::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  if (tensorboard_) tensorboard_->add_scalars(step, values);
}

void RunLog::gpu_peaks(const std::string& gpu_name, const c10::Device& device,
                       std::optional<double> measured_peak, Precision precision) {
  datasheet_peak_flops_ = datasheet_bf16_peak_flops(gpu_name);
  if (quiet()) return;
  const double bf16 = storage_precision(precision) == Precision::kBf16 && measured_peak
                          ? *measured_peak
                          : measure_matmul_peak_flops(at::kBFloat16, device);
  const double tf32 = measure_tf32_matmul_peak_flops(device);
  line(formatted(
      "peak: %s measured %.0f TFLOP/s bf16, %.0f TFLOP/s tf32 (MFU against %s); datasheet dense bf16 %s",
      gpu_name.c_str(), bf16 / 1e12, tf32 / 1e12, std::string(name_of(storage_precision(precision))).c_str(),
      datasheet_peak_flops_ ? formatted("%.0f TFLOP/s", *datasheet_peak_flops_ / 1e12).c_str()
                            : "unknown for this GPU"));
}

void RunLog::summary(int world_size, const std::vector<DatasetUse>& train, const std::string& rank_table) {
  if (logger_) std::ofstream(config_.run.dir + "/ranks.txt") << rank_table << "\n";
  if (quiet()) return;
  if (verbose_) line(config_table(config_) + "\n" + rank_table);
  const Config& c = config_;
  const ParallelConfig& p = c.parallel;
  line(formatted(
      "layout: %d ranks = islands %d x pp %d x dp %d x tp %d | ZeRO-%d | %s | %d microbatch%s a step",
      world_size, p.islands, p.pp, p.dp, p.tp, p.zero, std::string(name_of(c.train.precision)).c_str(),
      p.microbatches, p.microbatches == 1 ? "" : "es"));
  const int64_t tokens = static_cast<int64_t>(c.train.steps) * c.train.global_batch * c.model.seq;
  int64_t train_sequences = 0;
  for (const DatasetUse& use : train) train_sequences += use.sequences;
  // The global batch is the whole job's, islands included: every island reads its share of it.
  const double epochs = train_sequences > 0 ? static_cast<double>(c.train.steps) * c.train.global_batch /
                                                  static_cast<double>(train_sequences)
                                            : 0.0;
  const std::string validation =
      ", validation " + (c.train.eval_every > 0 && c.train.eval_sequences > 0
                             ? dataset_paths(c.data.val) + " (" + std::to_string(c.train.eval_sequences) +
                                   " sequences every " + std::to_string(c.train.eval_every) + " steps)"
                             : std::string("off"));
  for (const std::string& l : data_lines(train, c.model.seq, validation)) line(l);
  line("train: " + std::to_string(c.train.steps) + " steps x " + std::to_string(c.train.global_batch) +
       " sequences = " + with_commas(tokens) + " tokens" + formatted(" (%.2f epochs)", epochs));
  line(c.checkpoint.every > 0
           ? "checkpoints: every " + std::to_string(c.checkpoint.every) + " steps and after the last, " +
                 std::string(name_of(c.checkpoint.mode)) + ", keep " + std::to_string(c.checkpoint.keep) +
                 ", resume " + c.checkpoint.resume + ", in " + c.checkpoint_dir()
           : std::string("checkpoints: off (checkpoint.every = 0); a stop or crash loses the run"));
  line("config: every setting in " + c.run.dir + "/config.txt" +
       (verbose_ ? std::string() : " (on the console with --verbose)"));
}

void RunLog::finished(int64_t step, const std::string& committed, const std::string& checkpoint_costs) {
  if (!checkpoint_costs.empty()) line(checkpoint_costs);
  if (!committed.empty()) last_checkpoint_ = committed;
  const double seconds = steady_seconds() - start_seconds_;
  const int64_t steps = step - first_step_;
  const int64_t tokens = steps * config_.train.global_batch * config_.model.seq;
  JsonRecord record;
  record.add("event", std::string("end"))
      .add("step", step)
      .add("steps", steps)
      .add("tokens", tokens)
      .add("seconds", seconds);
  if (last_loss_) record.add("last_loss", *last_loss_);
  if (last_val_loss_) record.add("last_val_loss", *last_val_loss_);
  metrics_->write(record);
  line("done: step " + std::to_string(step) + " | " + std::to_string(steps) + " steps, " +
       with_commas(tokens) + " tokens in " + format_duration(seconds) +
       (last_loss_ ? formatted(" | loss %.4f", *last_loss_) : std::string()) +
       (last_val_loss_ ? formatted(" | val loss %.4f", *last_val_loss_) : std::string()) + " | checkpoint " +
       (last_checkpoint_.empty() ? std::string("none") : last_checkpoint_));
}

void RunLog::already_complete(int64_t step) {
  line("complete at step " + std::to_string(step) + " (train.steps = " + std::to_string(config_.train.steps) +
       "); nothing to do -- raise train.steps to train on");
}

void RunLog::start(int64_t step, int world_size) {
  JsonRecord record;
  record.add("event", std::string("start"))
      .add("step", step)
      .add("world_size", static_cast<int64_t>(world_size));
  first_step_ = step;
  start_seconds_ = steady_seconds();
  if (datasheet_peak_flops_)
    record.add("peak_flops_measured", peak_flops_).add("peak_flops_datasheet", *datasheet_peak_flops_);
  metrics_->write(record);
}

void RunLog::step(const StepMetrics& m) {
  if (!m.nonfinite) last_loss_ = m.loss;
  metrics_->write(to_json(m));
  scalars(m.step, step_scalars(m));
  if (display_) display_->step(m.step, m.step_seconds, m.loss);
}

void RunLog::nonfinite(const StepMetrics& m) {
  metrics_->write(JsonRecord()
                      .add("event", std::string("nonfinite"))
                      .add("step", m.step)
                      .add("action", std::string(m.skipped ? "skip" : "stop")));
  if (!m.skipped) return;  // a stop is reported by the error that ends the run
  ++skipped_steps_;
  line(nonfinite_line(m) + "; update skipped (" + std::to_string(skipped_steps_) + " skipped so far)");
}

void RunLog::progress(StepMetrics m) {
  if (m.step > 1) {
    interval_tokens_per_s_ += m.tokens_per_s;
    ++interval_steps_;
  }
  if (m.step % config_.train.log_every != 0 && m.step != config_.train.steps) return;
  if (interval_steps_ > 0) {
    m.tokens_per_s = interval_tokens_per_s_ / interval_steps_;
    m.mfu = model_flops_utilization(m.tokens_per_s, flops_per_token_, peak_flops_, ranks_);
  }
  line(progress_line(m, config_.train.steps) + " | ETA " + (display_ ? display_->eta() : "?"));
  interval_tokens_per_s_ = 0.0;
  interval_steps_ = 0;
}

void RunLog::checkpoint(int64_t step, const std::string& dir, double seconds) {
  metrics_->write(JsonRecord().add("step", step).add("checkpoint_s", seconds));
  scalars(step, {{"checkpoint/seconds", seconds}});
  line(checkpoint_line(step, config_.train.steps, dir, seconds));
  last_checkpoint_ = dir;
}

void RunLog::island_event(int64_t step, const std::string& event, int island) {
  metrics_->write(
      JsonRecord().add("event", event).add("step", step).add("island", static_cast<int64_t>(island)));
  std::string words = event.rfind("island_", 0) == 0 ? event.substr(7) : event;  // island_joined: joined
  std::replace(words.begin(), words.end(), '_', ' ');
  line("outer round at step " + std::to_string(step) + ": island " + std::to_string(island) + " " + words);
}

void RunLog::pseudo_gradient_left_out(int64_t step, int island, double norm) {
  metrics_->write(JsonRecord()
                      .add("event", "island_left_out")
                      .add("step", step)
                      .add("island", static_cast<int64_t>(island))
                      .add("pseudo_grad_norm", norm));
  line("outer sync at step " + std::to_string(step) + ": island " + std::to_string(island) +
       "'s pseudo-gradient norm " + formatted("%.4g", norm) +
       " exceeds outer.max_pseudo_grad_norm = " + formatted("%.4g", config_.outer.max_pseudo_grad_norm) +
       "; it was left out of the mean (check that island's data and learning rate)");
}

void RunLog::validation(int64_t step, double val_loss, const std::optional<IslandValidation>& islands) {
  last_val_loss_ = val_loss;
  JsonRecord record = JsonRecord().add("step", step).add("val_loss", val_loss);
  if (islands && !islands->islands.empty()) record.add("val_loss_islands", islands->islands);
  if (islands) record.add("val_loss_outer", islands->outer);
  metrics_->write(record);
  if (islands)
    scalars(step, {{"val/loss", val_loss}, {"val/loss_outer", islands->outer}});
  else
    scalars(step, {{"val/loss", val_loss}});
  line(validation_line(step, config_.train.steps, val_loss, islands));
}

void RunLog::sample(int64_t step, const std::string& prompt, const std::string& text) {
  metrics_->write(JsonRecord()
                      .add("event", std::string("sample"))
                      .add("step", step)
                      .add("prompt", prompt)
                      .add("text", text));
  line(formatted("step %5lld/%lld | sample:\n", static_cast<long long>(step),
                 static_cast<long long>(config_.train.steps)) +
       prompt + text + "\n---");
}

void RunLog::preempted(int64_t step, int signal, const std::string& signal_text, const std::string& dir) {
  metrics_->write(JsonRecord()
                      .add("event", std::string("preempted"))
                      .add("step", step)
                      .add("signal", static_cast<int64_t>(signal)));
  line("preempted by " + signal_text + " at step " + std::to_string(step) + ": " + dir +
       " committed; run again with checkpoint.resume=auto (the default) to continue");
}

}  // namespace atl::runtime
