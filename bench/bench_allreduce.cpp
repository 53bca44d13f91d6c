// All-reduce bus bandwidth of Atoll's MPI communicator against raw MPI_Allreduce, measured in the
// same run, interleaved, for 1 KiB to 64 MiB of fp32 (sum). Run under mpirun with 2+ ranks:
//   mpirun -np 2 build/bin/bench_allreduce
// Bus bandwidth follows nccl-tests: busbw = 2(p-1)/p * bytes / time.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/mpi_runtime.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of one call, the slowest rank's (a collective is as slow as its last rank).
template <typename Op>
double time_once(Op op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  op();
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return dt;
}

}  // namespace

int main(int argc, char** argv) {
  atl::comm::MpiRuntime runtime(&argc, &argv);
  auto world = runtime.world();
  const int p = world->size();
  const bool root = world->rank() == 0;
  if (root)
    std::printf(
        "all-reduce fp32 sum, %d ranks (busbw = 2(p-1)/p * bytes / time, median of interleaved runs)\n"
        "%10s %12s %12s %12s %12s %8s\n",
        p, "bytes", "atoll us", "atoll GB/s", "mpi us", "mpi GB/s", "ratio");
  double min_ratio = 1e9, sum_ratio = 0.0;
  int large_sizes = 0;
  for (int64_t bytes = 1024; bytes <= (int64_t{64} << 20); bytes *= 4) {
    at::Tensor tensor = at::ones({bytes / 4});
    // Repetitions for ~0.3 s per variant at the expected bandwidth, at least 5.
    const int reps = static_cast<int>(std::clamp<int64_t>((int64_t{300} << 20) / bytes, 5, 2000));
    std::vector<double> ours, raw;
    auto run_ours = [&] { world->all_reduce(tensor, atl::comm::ReduceOp::kSum)->wait(); };
    auto run_raw = [&] {
      MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), static_cast<int>(tensor.numel()), MPI_FLOAT, MPI_SUM,
                    world->handle());
    };
    run_ours();
    run_raw();
    for (int i = 0; i < reps; ++i) {
      ours.push_back(time_once(run_ours));
      raw.push_back(time_once(run_raw));
    }
    const double t_ours = median(ours), t_raw = median(raw);
    const double factor = 2.0 * (p - 1) / p * static_cast<double>(bytes) / 1e9;
    const double ratio = t_raw / t_ours;
    if (bytes >= (1 << 20)) {
      min_ratio = std::min(min_ratio, ratio);
      sum_ratio += ratio;
      ++large_sizes;
    }
    if (root)
      std::printf("%10lld %12.1f %12.2f %12.1f %12.2f %8.3f\n", static_cast<long long>(bytes), t_ours * 1e6,
                  factor / t_ours, t_raw * 1e6, factor / t_raw, ratio);
  }
  if (root)
    std::printf("all-reduce >= 1 MiB: atoll/raw bandwidth ratio min %.3f mean %.3f (target >= 0.95)\n",
                min_ratio, sum_ratio / large_sizes);
  return 0;
}
