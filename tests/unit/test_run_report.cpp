// `atoll report` (runtime/run_report.h) over a synthetic run directory: a crash and relaunch whose
// replayed steps replace the first attempt's, a preemption, a skipped update, checkpoints, validation
// losses, nan written by %.17g, and a last line torn by a crash.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/loss_plot.h"
#include "launcher/run_summary.h"
#include "runtime/config/config.h"
#include "runtime/metrics/metrics.h"
#include "tests/temp_dir_test.h"

namespace atl::launcher {
namespace {

using namespace atl::runtime;  // the config and model the launcher's back ends read

namespace fs = std::filesystem;

class RunReport : public atl::test::TempDirTest {};

// A step record as the trainer writes it (to_json's fields, numbers as %.17g would).
std::string step_record(int step, const std::string& loss, double tokens_per_s, double step_s,
                        bool skipped = false) {
  std::ostringstream r;
  r << "{\"step\":" << step << ",\"loss\":" << loss
    << ",\"lr\":0.001,\"grad_norm\":1.5,\"tokens_per_s\":" << tokens_per_s
    << ",\"mfu\":" << tokens_per_s / 10000.0 << ",\"step_s\":" << step_s
    << ",\"comm_bytes\":1024,\"comm_wait_s\":0.01,\"checkpoint_wait_s\":0.25,\"rss_bytes\":1000000"
    << (skipped ? ",\"skipped\":1" : "") << "}\n";
  return r.str();
}

// Attempt 1 runs steps 1-6 and checkpoints at 4, then rank 1 dies; attempt 2 resumes at 4, replays
// 5-6 (skipping 5's update on a nan loss), checkpoints at 8 and is preempted; attempt 3 resumes at 8
// and is killed while writing step 11. Warm-up steps (1, 5, 9) run at 10 tokens/s; attempt 1's steps
// that were replayed carry values that would show if they leaked into the summary.
std::string crashed_run_log() {
  std::string log = "{\"event\":\"start\",\"step\":0,\"world_size\":2}\n";
  log += step_record(1, "4.9000000000000004", 10, 1);
  log += step_record(2, "4.7999999999999998", 1000, 2);
  log += step_record(3, "4.7000000000000002", 2000, 3);
  log += step_record(4, "4.5999999999999996", 3000, 4);
  log += "{\"step\":4,\"checkpoint_s\":0.5}\n{\"step\":4,\"val_loss\":4.6500000000000004}\n";
  log += step_record(5, "99", 1e6, 1000);
  log += step_record(6, "99", 1e6, 1000, true);
  log += "{\"step\":6,\"checkpoint_s\":100}\n{\"step\":6,\"val_loss\":0.10000000000000001}\n";
  log +=
      "{\"event\":\"restart\",\"attempt\":1,\"failed_rank\":1,\"reason\":\"rank 1 exited on signal 9 "
      "(Killed)\"}\n";
  log += "{\"event\":\"start\",\"step\":4,\"world_size\":2}\n";
  log += step_record(5, "nan", 10, 5, true);
  log += "{\"event\":\"nonfinite\",\"step\":5,\"action\":\"skip\"}\n";
  log += step_record(6, "4.4000000000000004", 4000, 6);
  log += step_record(7, "4.2999999999999998", 5000, 7);
  log += step_record(8, "4.2000000000000002", 6000, 8);
  log += "{\"step\":8,\"checkpoint_s\":1.5}\n{\"step\":8,\"val_loss\":4.25}\n";
  log += "{\"event\":\"preempted\",\"step\":8}\n";
  log += "{\"event\":\"start\",\"step\":8,\"world_size\":2}\n";
  log += step_record(9, "4.0999999999999996", 10, 9);
  log += step_record(10, "4", 14000, 10);
  log += "{\"step\":10,\"val_loss\":4.2999999999999998}\n";
  log += "{\"step\":11,\"loss\":3.8999999999999999,\"lr\":0.0";  // torn: no closing brace, no newline
  return log;
}

// The points of the <polyline class="NAME"> element (0 when there is none).
size_t polyline_points(const std::string& svg, const std::string& name) {
  const size_t element = svg.find("<polyline class=\"" + name + "\"");
  if (element == std::string::npos) return 0;
  const size_t begin = svg.find("points=\"", element) + 8;
  std::istringstream points(svg.substr(begin, svg.find('"', begin) - begin));
  size_t count = 0;
  for (std::string point; points >> point;) ++count;
  return count;
}

void expect_well_formed(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  ASSERT_GE(svg.size(), 7u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(svg.find("nan"), std::string::npos);  // no coordinate computed from a nan or a 0/0
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST_F(RunReport, SummarisesTheHistoryTheFinalModelCameFrom) {
  Config config;
  config.train.global_batch = 8;
  config.model.seq = 64;
  write_file("config.yaml", config_to_yaml(config));
  write_file("metrics.jsonl", crashed_run_log());
  const RunSummary s = summarize_run(dir_.string());

  EXPECT_EQ(s.run_dir, dir_.string());
  EXPECT_EQ(s.steps, 10);
  ASSERT_TRUE(s.tokens.has_value());
  EXPECT_EQ(*s.tokens, 10 * 8 * 64);

  ASSERT_EQ(s.train_loss.size(), 10u);  // steps 1-10 once each
  for (size_t i = 0; i < s.train_loss.size(); ++i)
    EXPECT_EQ(s.train_loss[i].step, static_cast<int64_t>(i) + 1);
  EXPECT_TRUE(std::isnan(s.train_loss[4].loss));  // step 5: attempt 2's nan, not attempt 1's 99
  EXPECT_DOUBLE_EQ(s.train_loss[5].loss, 4.4);    // step 6: the replay wins
  ASSERT_TRUE(s.first_loss && s.final_loss);
  EXPECT_EQ(s.first_loss->step, 1);
  EXPECT_DOUBLE_EQ(s.first_loss->loss, 4.9);
  EXPECT_EQ(s.final_loss->step, 10);
  EXPECT_DOUBLE_EQ(s.final_loss->loss, 4.0);

  ASSERT_EQ(s.val_loss.size(), 3u);  // 4, 8, 10: attempt 1's step-6 evaluation was replayed away
  ASSERT_TRUE(s.final_val_loss && s.best_val_loss);
  EXPECT_EQ(s.final_val_loss->step, 10);
  EXPECT_DOUBLE_EQ(s.final_val_loss->loss, 4.3);
  EXPECT_EQ(s.best_val_loss->step, 8);
  EXPECT_DOUBLE_EQ(s.best_val_loss->loss, 4.25);
  EXPECT_TRUE(s.val_loss_outer.empty());

  // Steps 2, 3, 4, 6, 7, 8, 10 (1, 5 and 9 are the first after a start): 1000 ... 6000 and 14000.
  EXPECT_EQ(s.throughput_steps, 7);
  ASSERT_TRUE(s.median_tokens_per_s && s.mean_tokens_per_s && s.mean_mfu);
  EXPECT_DOUBLE_EQ(*s.median_tokens_per_s, 4000.0);
  EXPECT_DOUBLE_EQ(*s.mean_tokens_per_s, 5000.0);
  EXPECT_NEAR(*s.mean_mfu, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.train_seconds, 55.0);  // 1 + 2 + ... + 10 s

  EXPECT_EQ(s.starts, 3);
  ASSERT_EQ(s.restarts.size(), 1u);
  EXPECT_EQ(s.restarts[0].attempt, 1);
  EXPECT_EQ(s.restarts[0].failed_rank, 1);
  EXPECT_EQ(s.restarts[0].reason, "rank 1 exited on signal 9 (Killed)");
  ASSERT_TRUE(s.restarts[0].resumed_step.has_value());
  EXPECT_EQ(*s.restarts[0].resumed_step, 4);
  EXPECT_EQ(s.preemptions, std::vector<int64_t>{8});
  EXPECT_EQ(s.skipped_steps, std::vector<int64_t>{5});  // attempt 1's skipped step 6 was replayed
  EXPECT_FALSE(s.nonfinite_stop_step.has_value());

  EXPECT_EQ(s.checkpoints, 2);  // 4 and 8; attempt 1's step-6 save is not in the final history
  EXPECT_DOUBLE_EQ(s.mean_checkpoint_s, 1.0);
  EXPECT_DOUBLE_EQ(s.max_checkpoint_s, 1.5);
  EXPECT_DOUBLE_EQ(s.checkpoint_wait_s, 2.5);  // 0.25 s in each of the 10 steps

  ASSERT_EQ(s.notes.size(), 1u);  // the torn step-11 record
  EXPECT_NE(s.notes[0].find("line 26 is cut short"), std::string::npos) << s.notes[0];
}

TEST_F(RunReport, TableAlignsEveryValue) {
  Config config;
  write_file("config.yaml", config_to_yaml(config));
  write_file("metrics.jsonl", crashed_run_log());
  const std::string table = summary_table(summarize_run(dir_.string()));
  for (const char* expected :
       {"steps completed", "tokens ", "40,960", "first 4.9000 (step 1), final 4.0000 (step 10)",
        "final 4.3000 (step 10), best 4.2500 (step 8)", "median 4000, mean 5000 over 7 steps", "mean 50.0%",
        "55.0 s", "attempt 1: rank 1 failed (rank 1 exited on signal 9 (Killed)), resumed at step 4",
        "1 (step 8)", "1 (step 5)", "2 written; training blocked 1.000 s mean, 1.500 s max", "2.500 s in all",
        "cut short"})
    EXPECT_NE(table.find(expected), std::string::npos) << expected << " not in\n" << table;
  // Every line, continuation lines too, has its value in the first line's value column.
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);
  const size_t column = line.find(dir_.string());
  ASSERT_NE(column, std::string::npos);
  do {
    ASSERT_GT(line.size(), column) << line;
    EXPECT_EQ(line[column - 1], ' ') << line;
    EXPECT_NE(line[column], ' ') << line;
  } while (std::getline(lines, line));
}

TEST_F(RunReport, LossCurveHasAPointPerFiniteStepAndMarksTheRestartAndPreemption) {
  write_file("metrics.jsonl", crashed_run_log());
  const std::string svg = loss_curve_svg(summarize_run(dir_.string()));
  expect_well_formed(svg);
  EXPECT_EQ(polyline_points(svg, "train-loss"), 9u);  // steps 1-10 but the nan of step 5
  EXPECT_EQ(polyline_points(svg, "val-loss"), 3u);
  EXPECT_NE(svg.find(">restart<"), std::string::npos);
  EXPECT_NE(svg.find(">preempted<"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find("skipped update"), std::string::npos);
}

TEST_F(RunReport, LossCurveOfAFiniteRunHasAPointPerStep) {
  std::string log;
  for (int step = 1; step <= 50; ++step) log += step_record(step, std::to_string(5.0 - 0.05 * step), 1000, 1);
  write_file("metrics.jsonl", log + "{\"step\":50,\"val_loss\":2.5,\"val_loss_outer\":2.4}\n");
  const RunSummary s = summarize_run(dir_.string());
  EXPECT_FALSE(s.tokens.has_value());  // no config.yaml
  EXPECT_TRUE(s.notes.empty());
  const std::string svg = loss_curve_svg(s);
  expect_well_formed(svg);
  EXPECT_EQ(polyline_points(svg, "train-loss"), 50u);
  EXPECT_EQ(polyline_points(svg, "val-loss-outer"), 1u);
  EXPECT_EQ(svg.find(">restart<"), std::string::npos);
}

TEST_F(RunReport, SameStepLastRecordWinsWithoutStartEvents) {
  // A log from before start events: the first step is the warm-up, and a repeated step replaces.
  std::istringstream log(step_record(1, "3", 10, 1) + step_record(2, "2.5", 100, 1) +
                         step_record(2, "2", 300, 1) +
                         "{\"step\":2,\"val_loss\":9}\n{\"step\":2,\"val_loss\":1.5}\n");
  const RunSummary s = summarize_metrics(log);
  ASSERT_EQ(s.train_loss.size(), 2u);
  EXPECT_DOUBLE_EQ(s.train_loss[1].loss, 2.0);
  ASSERT_TRUE(s.median_tokens_per_s.has_value());
  EXPECT_DOUBLE_EQ(*s.median_tokens_per_s, 300.0);
  ASSERT_TRUE(s.best_val_loss.has_value());
  EXPECT_DOUBLE_EQ(s.best_val_loss->loss, 1.5);
}

TEST_F(RunReport, ToleratesTornAndGarbledLinesAndNonFiniteValues) {
  std::istringstream log(step_record(1, "inf", 10, 1) + "not json at all\n" + step_record(2, "-nan", 20, 1) +
                         step_record(3, "2", 30, 1) +
                         "{\"event\":\"nonfinite\",\"step\":3,\"action\":\"stop\"}\n" +
                         "{\"step\":4,\"loss\":1.");
  const RunSummary s = summarize_metrics(log, "m.jsonl");
  ASSERT_EQ(s.train_loss.size(), 3u);
  EXPECT_TRUE(std::isinf(s.train_loss[0].loss));
  EXPECT_TRUE(std::isnan(s.train_loss[1].loss));
  ASSERT_TRUE(s.nonfinite_stop_step.has_value());
  EXPECT_EQ(*s.nonfinite_stop_step, 3);
  ASSERT_EQ(s.notes.size(), 2u);
  EXPECT_NE(s.notes[0].find("m.jsonl line 2 is not a record"), std::string::npos) << s.notes[0];
  EXPECT_NE(s.notes[1].find("m.jsonl line 6 is cut short"), std::string::npos) << s.notes[1];
  expect_well_formed(loss_curve_svg(s));
}

TEST_F(RunReport, PlotsZeroOrOnePointWithoutDividingByZero) {
  RunSummary none;
  expect_well_formed(loss_curve_svg(none));
  EXPECT_EQ(polyline_points(loss_curve_svg(none), "train-loss"), 0u);

  RunSummary one;
  one.steps = 1;
  one.train_loss = {{1, 3.5}};
  one.val_loss = {{1, 3.5}};
  const std::string svg = loss_curve_svg(one);
  expect_well_formed(svg);
  EXPECT_EQ(polyline_points(svg, "train-loss"), 1u);
  EXPECT_NE(svg.find("<circle"), std::string::npos);  // a one-point polyline draws nothing
}

TEST_F(RunReport, RefusesWhatIsNotARunDirectoryNamingTheFix) {
  const auto message = [](const std::string& dir) {
    try {
      summarize_run(dir);
    } catch (const std::exception& e) {  // invalid_argument for a wrong path, runtime_error beyond
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(dir_.string() + "/missing").find("does not exist"), std::string::npos);
  EXPECT_NE(
      message(dir_.string()).find("has no metrics.jsonl; is it a run directory (run.dir of the config)?"),
      std::string::npos);
  write_file("metrics.jsonl", "{\"event\":\"start\",\"step\":0,\"world_size\":1}\n{\"step\":1,\"lo");
  EXPECT_NE(message(dir_.string()).find("has no step records"), std::string::npos);
}

// The writer (runtime/metrics) and this reader agree: a NaN loss is written as null, and read back
// as NaN; finite values come back exactly.
TEST(RunReportReader, ReadsWhatTheTrainerWrites) {
  StepMetrics nan_step;
  nan_step.step = 1;
  nan_step.loss = std::nan("");
  nan_step.skipped = true;
  StepMetrics finite_step;
  finite_step.step = 2;
  finite_step.loss = 5.6183815002441406;
  const std::string nan_line = to_json(nan_step).str();
  EXPECT_NE(nan_line.find("\"loss\":null"), std::string::npos) << nan_line;
  std::istringstream log(nan_line + "\n" + to_json(finite_step).str() + "\n");
  const RunSummary s = summarize_metrics(log);
  ASSERT_EQ(s.train_loss.size(), 2u);
  EXPECT_TRUE(std::isnan(s.train_loss[0].loss));
  EXPECT_EQ(s.train_loss[1].loss, 5.6183815002441406);
  EXPECT_EQ(s.skipped_steps, std::vector<int64_t>{1});
  EXPECT_TRUE(s.notes.empty());
  EXPECT_FALSE(s.kv_wait_s.has_value()) << "no context parallelism, no K/V wait";
}

// Context parallelism's exposed K/V wait: written per step with its ring bytes, summed by the report.
TEST(RunReportReader, SumsTheContextParallelKeyValueWait) {
  StepMetrics first, second;
  first.step = 1;
  second.step = 2;
  for (StepMetrics* m : {&first, &second}) {
    m->loss = 3.0;
    m->context_parallel = true;
    m->cp_bytes = 4096;
  }
  first.kv_wait_seconds = 0.25;
  second.kv_wait_seconds = 0.5;
  const std::string line = to_json(first).str();
  EXPECT_NE(line.find("\"cp_bytes\":4096,\"kv_wait_s\":0.25"), std::string::npos) << line;
  std::istringstream log(line + "\n" + to_json(second).str() + "\n");
  const RunSummary s = summarize_metrics(log);
  ASSERT_TRUE(s.kv_wait_s.has_value());
  EXPECT_DOUBLE_EQ(*s.kv_wait_s, 0.75);
  EXPECT_NE(summary_table(s).find("0.750 s in all (context parallelism"), std::string::npos);
}

}  // namespace
}  // namespace atl::launcher
