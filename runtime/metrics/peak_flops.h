// The matrix-product peak of this machine, measured: the MFU denominator on CPU (there is no
// datasheet number for "2 cores of whatever this VM is"). Measured with the thread count the
// caller runs with, so MFU compares like with like.
#pragma once

#include <c10/core/ScalarType.h>

namespace atl::runtime {

// FLOP/s of matrix products of size n x n in `dtype` (the training's compute dtype), best of
// repeated runs over about `seconds`.
double measure_matmul_peak_flops(at::ScalarType dtype = at::kFloat, int n = 1024, double seconds = 0.5);

}  // namespace atl::runtime
