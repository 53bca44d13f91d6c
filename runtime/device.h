// The device each rank trains on (run.device): chosen once at start-up from what the config asks,
// what this build can run and the GPUs this process sees, then bound before any CUDA call.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "runtime/config/config.h"

namespace atl::runtime {

struct DeviceChoice {
  c10::Device device = c10::Device(c10::kCPU);
  // Said once at start-up by rank 0 when auto fell back to the CPU, or when ranks share GPUs (else empty).
  std::string note;
  bool shares_gpu = false;  // more ranks on this node than GPUs, allowed by run.share_gpu
};

// auto: cuda:device_for(local_rank) when this build has the CUDA path and the node's `local_size`
// ranks each have a GPU of the `cuda_devices` (NCCL refuses two ranks of a group on one GPU), else
// the CPU with a note. cuda: that device, or ConfigError (one line, the fix) when there is no GPU,
// too few of them, or no CUDA path in the build. cpu: the CPU. `share_gpu` (run.share_gpu) lets more
// ranks than GPUs on a node through, round robin, with a note: each such rank then needs a NCCL host
// identity of its own (comm/nccl_host_identity.h) before its first NCCL call. `one_rank_islands`
// (parallel.islands > 1 with pp = dp = tp = 1) lets them through as well, without host ids, with a
// note: every NCCL group then has one member (the island group has no NCCL plane: the islands
// exchange host copies over MPI), so no NCCL runs between ranks and any number may share a GPU.
DeviceChoice choose_device(DeviceKind requested, bool cuda_built, int cuda_devices, int local_rank,
                           int local_size = 1, bool share_gpu = false, bool one_rank_islands = false);

// The GPUs this process sees (0 with a CPU-only LibTorch or no driver).
int visible_cuda_devices();
// Whether this binary was built with the CUDA path (-DATOLL_WITH_CUDA).
bool cuda_path_built();

// Makes `device` this thread's current CUDA device (nothing for the CPU), so that every later CUDA
// call, NCCL's included, lands on it.
void bind_device(const c10::Device& device);

// Deterministic kernels for the rest of the process (run.deterministic): LibTorch's deterministic
// algorithms, strict -- an operation that has no deterministic kernel stops the run with LibTorch's
// message naming it, since in warn-only mode the fused attention backward (flash and memory
// efficient) keeps its atomic, order-dependent accumulation and only warns -- and, unless the user
// set one, the fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG) cuBLAS needs to repeat itself.
// Before any matmul.
void use_deterministic_kernels();

// The GPU's name, e.g. "NVIDIA H100 80GB HBM3" ("" for the CPU).
std::string gpu_name(const c10::Device& device);
// "cuda:0 (NVIDIA H100 80GB HBM3)" or "cpu": the start-up table's device line.
std::string describe_device(const c10::Device& device);

}  // namespace atl::runtime
