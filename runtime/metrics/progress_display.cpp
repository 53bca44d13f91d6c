#include "runtime/metrics/progress_display.h"

#include <cstdio>
#include <ostream>

namespace atl::runtime {

std::string format_duration(double seconds) {
  char buf[32];
  const long s = static_cast<long>(seconds + 0.5);
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%ld s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm %02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh %02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

ProgressDisplay::ProgressDisplay(std::ostream* out, bool bar, int64_t total_steps)
    : out_(out), bar_(bar && out != nullptr), total_steps_(total_steps) {}

void ProgressDisplay::line(const std::string& text) {
  if (!out_) return;
  if (bar_shown_) *out_ << "\r\033[K";  // erase the bar; the next step draws it again
  bar_shown_ = false;
  *out_ << text << std::endl;
}

void ProgressDisplay::step(int64_t step, double step_seconds, double loss) {
  seconds_per_step_ = seconds_per_step_ == 0.0 ? step_seconds : 0.9 * seconds_per_step_ + 0.1 * step_seconds;
  step_ = step;
  if (!bar_) return;
  constexpr int kWidth = 30;
  const double done = total_steps_ > 0 ? static_cast<double>(step) / static_cast<double>(total_steps_) : 1.0;
  const int filled = static_cast<int>(done * kWidth);
  char buf[160];
  std::snprintf(buf, sizeof buf, "\r\033[K[%s%s] %3.0f%% step %lld/%lld | loss %.4f | ETA %s",
                std::string(static_cast<size_t>(filled), '#').c_str(),
                std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), 100.0 * done,
                static_cast<long long>(step), static_cast<long long>(total_steps_), loss, eta().c_str());
  *out_ << buf << std::flush;
  bar_shown_ = true;
}

std::string ProgressDisplay::eta() const {
  if (step_ == 0) return "?";
  return format_duration(seconds_per_step_ * static_cast<double>(total_steps_ - step_));
}

}  // namespace atl::runtime
