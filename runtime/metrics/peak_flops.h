// The matrix-product peak of this rank's device, measured: the MFU denominator. On the CPU there is
// no datasheet number for "2 cores of whatever this VM is", so the measured peak is the only one; on
// a GPU the datasheet's dense peak is printed beside it (what MFU is usually quoted against).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace atl::runtime {

// FLOP/s of n x n matrix products in `dtype` (the training's compute dtype) on `device`, best of
// repeated runs over about `seconds`; on a GPU each timed run is synchronised at both ends. n = 0
// picks the size: 1024 on the CPU (measured with the thread count the caller runs with, so MFU
// compares like with like), 8192 on a GPU (large enough to reach the tensor cores' peak).
double measure_matmul_peak_flops(at::ScalarType dtype = at::kFloat, c10::Device device = c10::kCPU, int n = 0,
                                 double seconds = 0.5);

// On a GPU: the fp32 matmul peak with TF32 tensor cores allowed for the measurement only (fp32
// training keeps LibTorch's default, IEEE fp32 matmuls). What an fp32 run would reach with TF32 on.
double measure_tf32_matmul_peak_flops(c10::Device device);

// The datasheet's dense bf16 tensor-core peak of a GPU by its device name (e.g. "NVIDIA H100 80GB
// HBM3": 989 TFLOP/s), or nothing for a name not in the table.
std::optional<double> datasheet_bf16_peak_flops(const std::string& device_name);

}  // namespace atl::runtime
