// run.device: which device a rank trains on, for every combination of what the config asks, what
// the build has and how many GPUs the rank sees; and the datasheet peaks MFU is quoted against.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "runtime/device.h"
#include "runtime/metrics/device_memory.h"
#include "runtime/metrics/peak_flops.h"

namespace atl::runtime {
namespace {

std::string error_of(DeviceKind kind, bool built, int devices) {
  try {
    choose_device(kind, built, devices, 0);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Device, CpuIsTheCpuWhateverTheMachineHas) {
  for (bool built : {false, true})
    for (int devices : {0, 8}) {
      const DeviceChoice choice = choose_device(DeviceKind::kCpu, built, devices, 3);
      EXPECT_EQ(choice.device, c10::Device(c10::kCPU));
      EXPECT_EQ(choice.note, "");  // said nothing: the user asked for it
    }
}

TEST(Device, AutoTakesTheLocalRanksGpuWhenThereIsOne) {
  const DeviceChoice choice = choose_device(DeviceKind::kAuto, true, 8, 6, 8);
  EXPECT_EQ(choice.device, c10::Device(c10::kCUDA, 6));
  EXPECT_EQ(choice.note, "");
}

TEST(Device, AutoFallsBackToTheCpuWithOneLineSayingWhy) {
  const DeviceChoice no_gpu = choose_device(DeviceKind::kAuto, true, 0, 0);
  EXPECT_EQ(no_gpu.device, c10::Device(c10::kCPU));
  EXPECT_EQ(no_gpu.note,
            "device: run.device auto: no CUDA device is visible to this rank; training on the CPU");
  const DeviceChoice no_build = choose_device(DeviceKind::kAuto, false, 8, 0);
  EXPECT_EQ(no_build.device, c10::Device(c10::kCPU));
  EXPECT_EQ(no_build.note,
            "device: run.device auto: this atoll was built without the CUDA path; training on the CPU");
}

TEST(Device, CudaTakesTheLocalRanksGpu) {
  EXPECT_EQ(choose_device(DeviceKind::kCuda, true, 8, 5, 8).device, c10::Device(c10::kCUDA, 5));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, true, 8, 1, 2).device, c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, true, 2, -1).device,
            c10::Device(c10::kCUDA, 0));  // unknown local rank
}

TEST(Device, MoreRanksThanGpusOnANodeIsTheCpuForAutoAndAnErrorForCuda) {
  const DeviceChoice shared = choose_device(DeviceKind::kAuto, true, 1, 1, 2);
  EXPECT_EQ(shared.device, c10::Device(c10::kCPU));
  EXPECT_EQ(
      shared.note,
      "device: run.device auto: 2 ranks on this node share 1 GPU and NCCL needs a GPU per rank; training on "
      "the CPU");
  try {
    choose_device(DeviceKind::kCuda, true, 2, 0, 4);
    FAIL() << "4 ranks on 2 GPUs were accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "config: run.device = cuda but 4 ranks on this node share 2 GPUs and NCCL needs a GPU per rank; "
        "launch at most 2 ranks per node, set run.share_gpu: true (for tests: slower NCCL over sockets), or "
        "set run.device: cpu");
  }
}

TEST(Device, ShareGpuLetsMoreRanksThanGpusOntoThemRoundRobinAndSaysSo) {
  for (DeviceKind kind : {DeviceKind::kCuda, DeviceKind::kAuto}) {
    const DeviceChoice third = choose_device(kind, true, 2, 2, 4, /*share_gpu=*/true);
    EXPECT_EQ(third.device, c10::Device(c10::kCUDA, 0));
    EXPECT_TRUE(third.shares_gpu);
    EXPECT_EQ(choose_device(kind, true, 2, 3, 4, true).device, c10::Device(c10::kCUDA, 1));
    EXPECT_EQ(third.note,
              "device: run.share_gpu: 4 ranks on this node share 2 GPUs; each rank has its own NCCL host id "
              "(NCCL_HOSTID), so NCCL joins them over its socket transport: real NCCL, for tests, not for "
              "speed");
  }
  // Asked for but not needed (a GPU per rank): nothing shared, nothing said.
  const DeviceChoice own = choose_device(DeviceKind::kCuda, true, 4, 3, 4, true);
  EXPECT_EQ(own.device, c10::Device(c10::kCUDA, 3));
  EXPECT_FALSE(own.shares_gpu);
  EXPECT_EQ(own.note, "");
  // It shares GPUs, it does not make them: no GPU is still the CPU for auto and an error for cuda.
  EXPECT_EQ(choose_device(DeviceKind::kAuto, true, 0, 0, 2, true).device, c10::Device(c10::kCPU));
  EXPECT_FALSE(choose_device(DeviceKind::kAuto, true, 0, 0, 2, true).shares_gpu);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, true, 0, 0, 2, true), ConfigError);
}

TEST(Device, IslandsOfOneRankShareAGpuWithoutHostIdsAndSaySoInOneLine) {
  // 4 islands of one rank on one GPU: every group on the GPU has one member, so no share_gpu is needed.
  for (DeviceKind kind : {DeviceKind::kCuda, DeviceKind::kAuto})
    for (bool share_gpu : {false, true}) {
      const DeviceChoice third = choose_device(kind, true, 1, 2, 4, share_gpu, /*one_rank_islands=*/true);
      EXPECT_EQ(third.device, c10::Device(c10::kCUDA, 0));
      EXPECT_FALSE(third.shares_gpu);  // no NCCL host id of its own: no NCCL group spans two ranks
      EXPECT_EQ(
          third.note,
          "device: 4 ranks on this node share 1 GPU as islands of one rank each: every group on the GPU "
          "has one member (no NCCL communicator is made) and the islands exchange over MPI on the host");
    }
  // Round robin over the GPUs there are; a GPU per rank says nothing.
  EXPECT_EQ(choose_device(DeviceKind::kCuda, true, 2, 3, 4, false, true).device, c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(choose_device(DeviceKind::kCuda, true, 4, 3, 4, false, true).note, "");
  // It needs a GPU all the same, and islands of several ranks still need one per rank.
  EXPECT_THROW(choose_device(DeviceKind::kCuda, true, 0, 0, 4, false, true), ConfigError);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, false, 1, 0, 4, false, true), ConfigError);
  EXPECT_THROW(choose_device(DeviceKind::kCuda, true, 1, 0, 4, false, false), ConfigError);
}

TEST(Device, CudaWithoutAGpuOrTheCudaPathIsOneConfigLineWithTheFix) {
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, true, 0),
      "config: run.device = cuda but no CUDA device is visible to this rank (torch sees 0; check nvidia-smi "
      "and CUDA_VISIBLE_DEVICES); set run.device: auto or cpu to train on the CPU");
  EXPECT_EQ(
      error_of(DeviceKind::kCuda, false, 8),
      "config: run.device = cuda but this atoll was built without the CUDA path (-DATOLL_WITH_CUDA=OFF or a "
      "CPU LibTorch); rebuild with -DATOLL_WITH_CUDA=ON or set run.device: cpu");
}

TEST(Device, ConfigSpellsTheThreeChoices) {
  EXPECT_EQ(parse_config("").run.device, DeviceKind::kAuto);
  EXPECT_EQ(parse_config("run: {device: cuda}").run.device, DeviceKind::kCuda);
  EXPECT_EQ(parse_config("", {"run.device=cpu"}).run.device, DeviceKind::kCpu);
  try {
    parse_config("run: {device: gpu}");
    FAIL() << "run.device: gpu was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "config: run.device = 'gpu' is not one of auto, cpu, cuda; set run.device to one of them, e.g. auto");
  }
}

TEST(Device, CpuHasNoAllocatorFigures) {
  EXPECT_FALSE(device_memory(c10::Device(c10::kCPU)).has_value());
}

TEST(DatasheetPeak, KnownGpusByTheirDeviceNames) {
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 80GB HBM3"), 989e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 PCIe"), 756e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H100 NVL"), 835e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA H200"), 989e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_DOUBLE_EQ(*datasheet_bf16_peak_flops("NVIDIA L40S"), 362e12);
  EXPECT_FALSE(datasheet_bf16_peak_flops("Some Future GPU").has_value());
}

// run.deterministic is strict: in warn-only mode LibTorch's fused attention backward keeps its
// order-dependent atomic accumulation on a GPU and only warns (seen on an H100, 2026-11-26).
TEST(DeterministicKernels, StrictSoThatAnOperationWithoutADeterministicKernelStopsTheRun) {
  at::Context& context = at::globalContext();
  const bool was = context.deterministicAlgorithms(),
             was_warn_only = context.deterministicAlgorithmsWarnOnly();
  use_deterministic_kernels();
  EXPECT_TRUE(context.deterministicAlgorithms());
  EXPECT_FALSE(context.deterministicAlgorithmsWarnOnly());
  EXPECT_NE(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr);
  context.setDeterministicAlgorithms(was, was_warn_only);
}

}  // namespace
}  // namespace atl::runtime
