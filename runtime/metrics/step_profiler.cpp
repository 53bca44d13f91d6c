#include "runtime/metrics/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace atl::runtime {
namespace {

namespace profiler = torch::autograd::profiler;
using Clock = std::chrono::steady_clock;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

constexpr size_t kSummaryRows = 15;

// One row of the summary: the time of every event of a name within the profiled steps.
struct ProfiledName {
  std::string name;
  int64_t calls = 0;
  double total_ms = 0.0;
};

// The rows of `names` with the largest totals, largest first, at most kSummaryRows of them.
std::vector<ProfiledName> heaviest(std::vector<ProfiledName> names) {
  std::sort(names.begin(), names.end(), [](const ProfiledName& a, const ProfiledName& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.name < b.name;
  });
  if (names.size() > kSummaryRows) names.resize(kSummaryRows);
  return names;
}

std::string formatted_row(const ProfiledName& row, double total_ms) {
  constexpr size_t kNameWidth = 100;
  std::string name = row.name.size() > kNameWidth ? row.name.substr(0, kNameWidth - 3) + "..." : row.name;
  char line[256];
  std::snprintf(line, sizeof line, "  %10.2f ms %5.1f%% %7lld x  ", row.total_ms,
                total_ms > 0 ? 100.0 * row.total_ms / total_ms : 0.0, static_cast<long long>(row.calls));
  return line + name;
}

}  // namespace

StepProfiler::StepProfiler(StepProfileOptions options) : options_(std::move(options)) {}

StepProfiler::~StepProfiler() {
  if (running_) profiler::disableProfiler();
}

void StepProfiler::before_step(int64_t step) {
  // A run resumed inside the window starts there: the steps it runs are profiled.
  if (running_ || options_.first_step <= 0 || step < options_.first_step || step > last_step()) return;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (options_.cuda) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/false, /*profile_memory=*/false,
                              /*with_stack=*/false, /*with_flops=*/false, /*with_modules=*/false);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  running_ = true;
  started_ = Clock::now();
}

std::vector<std::string> StepProfiler::after_step(int64_t step) {
  if (!running_ || step < last_step()) return {};
  running_ = false;
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  const double wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  std::filesystem::create_directories(options_.dir);
  const std::string trace = options_.dir + "/rank-" + std::to_string(options_.rank) + ".json";
  result->save(trace);
  if (options_.rank != 0) return {};

  // On a GPU the device's own activities (kernels, copies, fills), which never nest; on the CPU the
  // operators, whose times include the operators they call.
  std::map<std::string, ProfiledName> by_name;
  for (const profiler::KinetoEvent& event : result->events()) {
    if (options_.cuda != (event.deviceType() == c10::DeviceType::CUDA)) continue;
    ProfiledName& row = by_name[event.name()];
    row.name = event.name();
    row.calls += 1;
    row.total_ms += static_cast<double>(event.durationNs()) / 1e6;
  }
  std::vector<ProfiledName> rows;
  for (auto& [name, row] : by_name) rows.push_back(std::move(row));
  std::vector<std::string> lines{
      "profile: steps " + std::to_string(options_.first_step) + "-" + std::to_string(last_step()) + " (" +
      std::to_string(static_cast<long long>(wall_ms)) + " ms), traces in " + options_.dir +
      "/rank-R.json (Perfetto, TensorBoard); rank 0's " +
      (options_.cuda ? "GPU time by kernel" : "CPU time by operator, each including the operators it calls") +
      " (% of the steps' time):"};
  for (const ProfiledName& row : heaviest(std::move(rows))) lines.push_back(formatted_row(row, wall_ms));
  std::ofstream summary(options_.dir + "/summary.txt");
  for (const std::string& line : lines) summary << line << "\n";
  return lines;
}

}  // namespace atl::runtime
