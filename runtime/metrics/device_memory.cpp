#include "runtime/metrics/device_memory.h"

#include "atoll/build_config.h"

#if ATOLL_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace atl::runtime {

std::optional<DeviceMemory> device_memory(c10::Device device) {
#if ATOLL_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr size_t kAllPools = 0;  // StatType::AGGREGATE: large and small pools together
    return DeviceMemory{static_cast<uint64_t>(stats.allocated_bytes[kAllPools].current),
                        static_cast<uint64_t>(stats.reserved_bytes[kAllPools].current),
                        static_cast<uint64_t>(stats.allocated_bytes[kAllPools].peak)};
  }
#endif
  (void)device;
  return std::nullopt;
}

}  // namespace atl::runtime
