// Intra-op threads on SMT siblings: a matmul-heavy loop (fp32 and bf16 GEMMs of a decoder layer's
// shapes, forward and backward) at thread counts of the logical CPUs the affinity allows, the
// physical cores among them (runtime/host/cpu_cores.h) and one thread, interleaved, so that one run
// says which is faster on this machine's LibTorch. Where the machine has no SMT siblings the two
// counts are equal and only the scaling from one thread shows.
//   build/bin/bench_threads [REPS=15]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "runtime/host/cpu_cores.h"
#include "runtime/host/usable_cpus.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A dim-1024 layer's operands on 2048 tokens: x, W and dy.
std::vector<at::Tensor> operands(at::ScalarType dtype) {
  at::manual_seed(0);
  const auto options = at::TensorOptions().dtype(dtype);
  return {at::randn({2048, 1024}, options), at::randn({1024, 2816}, options),
          at::randn({2048, 2816}, options)};
}

// One step's products: x W (forward), dy W^T and x^T dy (backward).
double time_step(const std::vector<at::Tensor>& t) {
  const auto start = std::chrono::steady_clock::now();
  at::Tensor sum = at::mm(t[0], t[1]).sum() + at::mm(t[2], t[1].t()).sum() + at::mm(t[0].t(), t[2]).sum();
  (void)sum.item<float>();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const std::vector<int> cpus = atl::runtime::usable_cpu_ids();
  const int logical = static_cast<int>(cpus.size()), physical = atl::runtime::physical_cores(cpus);
  std::printf("%d logical CPUs in the affinity, %d physical cores; LibTorch's default: %d threads\n", logical,
              physical, at::get_num_threads());
  const std::set<int> counts = {1, physical, logical};
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const std::vector<at::Tensor> layer = operands(dtype);
    std::map<int, std::vector<double>> times;
    for (int r = 0; r < reps + 2; ++r)  // two warm-up rounds, then the counts interleaved
      for (int threads : counts) {
        at::set_num_threads(threads);
        const double seconds = time_step(layer);
        if (r >= 2) times[threads].push_back(seconds);
      }
    const double one = median(times[1]);
    for (int threads : counts)
      std::printf("%-5s %2d threads: %8.2f ms a step (median of %d), %.2fx one thread\n",
                  dtype == at::kFloat ? "fp32" : "bf16", threads, median(times[threads]) * 1e3, reps,
                  one / median(times[threads]));
  }
  return 0;
}
