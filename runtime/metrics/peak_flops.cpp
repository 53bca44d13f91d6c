#include "runtime/metrics/peak_flops.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string_view>

namespace atl::runtime {
namespace {

// Dense (no sparsity) bf16 peaks from NVIDIA's datasheets, most specific name first: an H100's
// form factor decides its clocks, and "H100" alone is taken as the SXM part.
struct DatasheetPeak {
  std::string_view name_part;
  double tflops;
};
constexpr std::array<DatasheetPeak, 10> kBf16Peaks{{{"H100 PCIe", 756.0},
                                                    {"H100 NVL", 835.0},
                                                    {"H100", 989.0},
                                                    {"H200", 989.0},
                                                    {"GH200", 989.0},
                                                    {"B200", 2250.0},
                                                    {"A100", 312.0},
                                                    {"A10G", 70.0},
                                                    {"L40S", 362.0},
                                                    {"L4", 121.0}}};

}  // namespace

double measure_matmul_peak_flops(at::ScalarType dtype, c10::Device device, int n, double seconds) {
  at::NoGradGuard no_grad;
  const bool gpu = device.is_cuda();
  if (n <= 0) n = gpu ? 8192 : 1024;
  // A GPU launches asynchronously: time a few products between synchronisations.
  const int per_timing = gpu ? 10 : 1;
  const auto sync = [&] {
    if (gpu) torch::cuda::synchronize(device.index());
  };
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  at::mm_out(c, a, b);  // warm-up: page in, let BLAS size its buffers, pick the kernel
  sync();
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(seconds);
  double best = 0.0;
  do {
    const auto t0 = clock::now();
    for (int i = 0; i < per_timing; ++i) at::mm_out(c, a, b);
    sync();
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, per_timing * 2.0 * n * n * static_cast<double>(n) / dt);
  } while (clock::now() < deadline);
  return best;
}

double measure_tf32_matmul_peak_flops(c10::Device device) {
  at::Context& context = at::globalContext();
  const bool was_allowed = context.allowTF32CuBLAS();
  context.setAllowTF32CuBLAS(true);
  const double peak = measure_matmul_peak_flops(at::kFloat, device);
  context.setAllowTF32CuBLAS(was_allowed);
  return peak;
}

std::optional<double> datasheet_bf16_peak_flops(const std::string& device_name) {
  for (const DatasheetPeak& peak : kBf16Peaks)
    if (device_name.find(peak.name_part) != std::string::npos) return peak.tflops * 1e12;
  return std::nullopt;
}

}  // namespace atl::runtime
