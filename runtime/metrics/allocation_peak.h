// The activation memory of a training step, measured exactly: the most bytes of tensors on one
// device allocated at once while an AllocationPeak lives, above what was allocated when it began --
// a step's activations, their gradients and, with recomputation, the reruns' at their peak.
//
// It counts through LibTorch's memory-profiling hook (what torch.profiler's profile_memory uses):
// the CPU allocator and the CUDA caching allocator report every allocation and free to the reporter
// installed in the thread's debug info, which the autograd engine's threads inherit. Not sampled,
// so a transient peak inside backward is seen; frees of tensors allocated before it began are not
// counted against it.
//
// The hook's slot is the profiler's (DebugInfoKind::PROFILER_STATE): while a profiler holds it
// (train.profile_start), installing a reporter there would hide the profiler from its own callbacks
// -- Kineto then read the reporter as its state and crashed -- so nothing is measured (0 bytes).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

namespace c10 {
class DebugInfoGuard;
}

namespace atl::runtime {

class AllocationPeak {
 public:
  explicit AllocationPeak(c10::Device device);
  ~AllocationPeak();
  AllocationPeak(const AllocationPeak&) = delete;
  AllocationPeak& operator=(const AllocationPeak&) = delete;

  // The peak so far of the bytes allocated on the device since construction, less those freed; 0
  // while a profiler holds the slot.
  int64_t peak_bytes() const;

  class Reporter;

 private:
  std::shared_ptr<Reporter> reporter_;
  std::unique_ptr<c10::DebugInfoGuard> guard_;
};

}  // namespace atl::runtime
