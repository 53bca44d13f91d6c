// GPU memory as the CUDA caching allocator sees it: what tensors hold, what the allocator has
// reserved from the driver (what nvidia-smi shows, less the CUDA context), and the peak held.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace atl::runtime {

struct DeviceMemory {
  uint64_t allocated = 0;  // bytes held by live tensors
  uint64_t reserved = 0;   // bytes the caching allocator holds from the driver
  uint64_t peak = 0;       // the most bytes live tensors have held since the start
};

// The allocator's figures for `device`; nothing on the CPU (or a build without the CUDA path).
std::optional<DeviceMemory> device_memory(c10::Device device);

}  // namespace atl::runtime
