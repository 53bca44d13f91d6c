#include "runtime/metrics/peak_flops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

namespace atl::runtime {

double measure_matmul_peak_flops(at::ScalarType dtype, int n, double seconds) {
  at::NoGradGuard no_grad;
  const auto options = at::TensorOptions().dtype(dtype);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  at::mm_out(c, a, b);  // warm-up: page in, let BLAS size its buffers
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(seconds);
  double best = 0.0;
  do {
    const auto t0 = clock::now();
    at::mm_out(c, a, b);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / dt);
  } while (clock::now() < deadline);
  return best;
}

}  // namespace atl::runtime
