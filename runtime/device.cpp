#include "runtime/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <optional>

#include "atoll/build_config.h"
#include "runtime/placement.h"

#if ATOLL_CUDA
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace atl::runtime {

namespace {

// Why this rank has no GPU to train on, and what fixes it for a config that asked for cuda.
struct NoGpu {
  std::string why, fix;
};

std::optional<NoGpu> no_gpu(bool cuda_built, int cuda_devices, int local_size, bool share_gpu,
                            bool one_rank_islands) {
  if (!cuda_built)
    return NoGpu{
        "this atoll was built without the CUDA path",
        " (-DATOLL_WITH_CUDA=OFF or a CPU LibTorch); rebuild with -DATOLL_WITH_CUDA=ON or set run.device: "
        "cpu"};
  if (cuda_devices < 1)
    return NoGpu{
        "no CUDA device is visible to this rank",
        " (torch sees 0; check nvidia-smi and CUDA_VISIBLE_DEVICES); set run.device: auto or cpu to train "
        "on the CPU"};
  if (local_size > cuda_devices && !share_gpu && !one_rank_islands)
    return NoGpu{std::to_string(local_size) + " ranks on this node share " + std::to_string(cuda_devices) +
                     " GPU" + (cuda_devices == 1 ? "" : "s") + " and NCCL needs a GPU per rank",
                 "; launch at most " + std::to_string(cuda_devices) +
                     " ranks per node, set run.share_gpu: true (for tests: slower NCCL over sockets), or "
                     "set run.device: cpu"};
  return std::nullopt;
}

}  // namespace

DeviceChoice choose_device(DeviceKind requested, bool cuda_built, int cuda_devices, int local_rank,
                           int local_size, bool share_gpu, bool one_rank_islands) {
  if (requested == DeviceKind::kCpu) return {};
  if (const std::optional<NoGpu> missing =
          no_gpu(cuda_built, cuda_devices, local_size, share_gpu, one_rank_islands)) {
    if (requested == DeviceKind::kCuda)
      throw ConfigError({"config: run.device = cuda but " + missing->why + missing->fix});
    return {c10::Device(c10::kCPU), "device: run.device auto: " + missing->why + "; training on the CPU"};
  }
  DeviceChoice choice{
      c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_for(local_rank, cuda_devices))), ""};
  const std::string gpus = std::to_string(cuda_devices) + " GPU" + (cuda_devices == 1 ? "" : "s");
  if (local_size > cuda_devices && one_rank_islands) {
    // No NCCL group spans two ranks, so none needs a host id of its own: no socket transport either.
    choice.note = "device: " + std::to_string(local_size) + " ranks on this node share " + gpus +
                  " as islands of one rank each: every group on the GPU has one member (no NCCL "
                  "communicator is made) and the islands exchange over MPI on the host";
  } else if (local_size > cuda_devices) {
    choice.shares_gpu = true;
    choice.note = "device: run.share_gpu: " + std::to_string(local_size) + " ranks on this node share " +
                  gpus +
                  "; each rank has its own NCCL host id (NCCL_HOSTID), so NCCL joins them over its socket "
                  "transport: real NCCL, for tests, not for speed";
  }
  return choice;
}

int visible_cuda_devices() {
  return static_cast<int>(torch::cuda::device_count());
}

bool cuda_path_built() {
  return ATOLL_CUDA;
}

void bind_device(const c10::Device& device) {
#if ATOLL_CUDA
  if (device.is_cuda()) c10::cuda::set_device(device.index());
#else
  (void)device;
#endif
}

void use_deterministic_kernels() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
}

std::string gpu_name(const c10::Device& device) {
#if ATOLL_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  (void)device;
  return "";
}

std::string describe_device(const c10::Device& device) {
  return device.is_cuda() ? device.str() + " (" + gpu_name(device) + ")" : device.str();
}

}  // namespace atl::runtime
