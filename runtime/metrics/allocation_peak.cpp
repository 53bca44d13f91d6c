#include "runtime/metrics/allocation_peak.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <mutex>

namespace atl::runtime {

// Allocations arrive from the training thread and, on a GPU, the autograd engine's device thread.
class AllocationPeak::Reporter : public c10::MemoryReportingInfoBase {
 public:
  explicit Reporter(c10::Device device) : device_(device) {}

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, size_t /*total_allocated*/,
                         size_t /*total_reserved*/, c10::Device device) override {
    if (device.type() != device_.type()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    current_ += alloc_size;
    peak_ = std::max(peak_, current_);
  }
  bool memoryProfilingEnabled() const override { return true; }

  int64_t peak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }

 private:
  c10::Device device_;
  mutable std::mutex mutex_;
  int64_t current_ = 0, peak_ = 0;
};

AllocationPeak::AllocationPeak(c10::Device device) {
  if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE)) return;  // a profiler's
  reporter_ = std::make_shared<Reporter>(device);
  guard_ = std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, reporter_);
}

AllocationPeak::~AllocationPeak() = default;

int64_t AllocationPeak::peak_bytes() const {
  return reporter_ ? reporter_->peak() : 0;
}

}  // namespace atl::runtime
