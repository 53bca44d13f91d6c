// Rank 0's console: permanent lines (progress every log_every steps, checkpoints, validation) and,
// when asked for, a progress bar with the ETA redrawn after every step. Anything else (a log file,
// CI, `mpirun ... | tee`) gets plain lines only: never a carriage return or an escape code.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace atl::runtime {

class ProgressDisplay {
 public:
  ProgressDisplay(std::ostream* out, bool bar, int64_t total_steps);
  // A permanent line; the bar, if any, is cleared first and redrawn below it at the next step.
  void line(const std::string& text);
  // After each step: updates the step-time estimate and redraws the bar.
  void step(int64_t step, double step_seconds, double loss);
  // Time left at the current pace, e.g. "1m 02s" ("?" before the first step).
  std::string eta() const;

 private:
  std::ostream* out_;
  bool bar_;
  int64_t total_steps_;
  int64_t step_ = 0;
  double seconds_per_step_ = 0.0;  // an exponential average, so the ETA follows the current pace
  bool bar_shown_ = false;
};

// "45 s", "3m 07s", "2h 05m".
std::string format_duration(double seconds);

}  // namespace atl::runtime
