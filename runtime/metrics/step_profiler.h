// Kineto traces of chosen training steps (train.profile_start, train.profile_steps), as
// torch.profiler takes them: every rank writes a Chrome trace of those steps (CPU operators and, on
// a GPU, its kernels and copies), which Perfetto or TensorBoard open; rank 0 also sums the time by
// name, so the heaviest kernels of a step can be read without a viewer. Where a step's time goes is
// the question every speed lever starts from.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace atl::runtime {

struct StepProfileOptions {
  int64_t first_step = 0;  // 0: profile nothing
  int steps = 1;
  std::string dir;  // traces land in dir/rank-R.json, the summary in dir/summary.txt
  int rank = 0;
  bool cuda = false;  // the GPU's activities too
};

class StepProfiler {
 public:
  explicit StepProfiler(StepProfileOptions options);
  ~StepProfiler();  // stops a profile still running (a run that ended early) without writing it
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Before step `step` (1-based) runs: starts the profile at the first profiled step.
  void before_step(int64_t step);
  // After step `step`: at the last profiled step, stops and writes the trace (and, on rank 0, the
  // summary); returns the lines to print, else nothing.
  std::vector<std::string> after_step(int64_t step);

 private:
  int64_t last_step() const { return options_.first_step + options_.steps - 1; }

  StepProfileOptions options_;
  bool running_ = false;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace atl::runtime
