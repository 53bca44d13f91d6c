#include "checkpoint/staging_copy.h"

#include <ATen/ATen.h>

#include "atoll/build_config.h"

#if ATOLL_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace atl::checkpoint {

at::Tensor host_staging_like(const at::Tensor& live) {
  return at::empty(live.sizes(), at::TensorOptions().dtype(live.scalar_type()).pinned_memory(live.is_cuda()));
}

#if ATOLL_CUDA
struct StagingCopy::Device {
  c10::cuda::CUDAStream side;  // waits, from its creation, for the compute stream's work so far
};
#else
struct StagingCopy::Device {};
#endif

StagingCopy::StagingCopy(c10::Device device) {
#if ATOLL_CUDA
  if (!device.is_cuda()) return;
  const auto index = device.index();
  device_ = std::make_unique<Device>(Device{c10::cuda::getStreamFromPool(false, index)});
  at::cuda::CUDAEvent state_ready;  // the state's last update, queued on the compute stream
  state_ready.record(c10::cuda::getCurrentCUDAStream(index));
  state_ready.block(device_->side);
#else
  (void)device;
#endif
}

StagingCopy::~StagingCopy() = default;
StagingCopy::StagingCopy(StagingCopy&&) noexcept = default;
StagingCopy& StagingCopy::operator=(StagingCopy&&) noexcept = default;

void StagingCopy::copy(const at::Tensor& host, const at::Tensor& live) {
#if ATOLL_CUDA
  if (device_ && live.is_cuda()) {
    const c10::cuda::CUDAStreamGuard on_side(device_->side);
    host.copy_(live, /*non_blocking=*/true);
    return;
  }
#endif
  host.copy_(live);
}

void StagingCopy::wait() {
#if ATOLL_CUDA
  if (device_) device_->side.synchronize();
#endif
}

}  // namespace atl::checkpoint
