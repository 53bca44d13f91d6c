// Copies of live training state into host memory for a checkpoint, from wherever the state lives.
//
// On the CPU a copy is a plain memcpy into the staging pool. On a GPU the pool is pinned host memory
// and the copies run on a side stream: the stream first waits for what was queued on the compute
// stream when the copy began (the state's last update), then moves the bytes while the next forward
// and backward run; wait() blocks until they have landed -- the fence the trainer passes before its
// next optimizer step.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

namespace atl::checkpoint {

// A staging buffer for `live`: the same shape and dtype, contiguous, in host memory (pinned when
// `live` is on a GPU, so device-to-host copies run at full speed and without blocking).
at::Tensor host_staging_like(const at::Tensor& live);

class StagingCopy {
 public:
  // Marks the point on the current stream of `device` the copies must come after; call on the
  // thread that updates the state. Nothing is marked for the CPU.
  explicit StagingCopy(c10::Device device);
  ~StagingCopy();
  StagingCopy(StagingCopy&&) noexcept;
  StagingCopy& operator=(StagingCopy&&) noexcept;

  // Starts copying `live` into `host` (from any thread): done at once on the CPU, queued on the
  // side stream on a GPU.
  void copy(const at::Tensor& host, const at::Tensor& live);
  // Blocks until every copy started so far has landed in host memory.
  void wait();

 private:
  struct Device;  // the side stream and the start event; null on the CPU
  std::unique_ptr<Device> device_;
};

}  // namespace atl::checkpoint
