// All-reduce bus bandwidth of Atoll's MPI communicator against raw MPI_Allreduce, measured in the
// same run, interleaved, for 1 KiB to 64 MiB of fp32 (sum). Run under mpirun with 2+ ranks:
//   mpirun -np 2 build/bin/bench_allreduce
// Bus bandwidth follows nccl-tests: busbw = 2(p-1)/p * bytes / time. Times are medians over
// interleaved repetitions; the atoll/mpi ratio is the median of per-round bandwidth ratios.
//
// A third column (mpi_i) times raw MPI_Iallreduce + MPI_Wait, the calls Atoll's backend makes above its
// blocking threshold: Atoll vs it is the wrapper's overhead, it vs MPI_Allreduce is Open MPI's
// non-blocking component (libnbc) against its blocking one (tuned).
//
// Sizes above 32 MiB: Open MPI allocates a temporary buffer of the message size per call, and glibc
// serves blocks that large with a fresh mmap, so every call pays page faults (~10x slower here, for
// both variants alike). `mpirun -x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=1073741824 ...`
// keeps that buffer in the heap and shows the transport's bandwidth instead.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/mpi_runtime.h"

namespace {

constexpr double kSecondsPerVariant = 0.3;     // per size: enough repetitions for a stable median
constexpr int kMinReps = 11, kMaxReps = 5000;  // 64 MiB: ~0.15 s a call (see above)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds of one call, the slowest rank's (a collective is as slow as its last rank). The barrier
// starts every rank together, so one variant's tail never leaks into the next one's time.
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
        "all-reduce fp32 sum, %d ranks (busbw = 2(p-1)/p * bytes / time; median of interleaved repetitions)\n"
        "%10s %6s | %10s %10s | %10s %10s | %10s %10s | %11s\n",
        p, "bytes", "reps", "atoll us", "atoll GB/s", "mpi us", "mpi GB/s", "mpi_i us", "mpi_i GB/s",
        "atoll/mpi");
  double min_ratio = 1e9, sum_ratio = 0.0;
  int large_sizes = 0;
  for (int64_t bytes = 1024; bytes <= (int64_t{64} << 20); bytes *= 4) {
    at::Tensor tensor = at::ones({bytes / 4});
    const int count = static_cast<int>(tensor.numel());
    auto run_atoll = [&] { world->all_reduce(tensor, atl::comm::ReduceOp::kSum)->wait(); };
    auto run_raw = [&] {
      MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    auto run_iallreduce = [&] {
      MPI_Request request;
      MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    };
    // Warm-up (connections, registration, first-touch of buffers), which also sizes the run.
    double warm = 0.0;
    for (int i = 0; i < 2; ++i) warm = time_once(run_atoll) + time_once(run_raw) + time_once(run_iallreduce);
    const int reps =
        static_cast<int>(std::clamp(3 * kSecondsPerVariant / warm, double{kMinReps}, double{kMaxReps}));
    // Interleaved repetitions spread the machine's drift (other jobs, frequency) over all variants;
    // rotating which one goes first removes any bias from the position in the sequence.
    std::vector<double> atoll, raw, nonblocking;
    for (int i = 0; i < reps; ++i) {
      for (int k = 0; k < 3; ++k) {
        switch ((i + k) % 3) {
          case 0:
            atoll.push_back(time_once(run_atoll));
            break;
          case 1:
            raw.push_back(time_once(run_raw));
            break;
          default:
            nonblocking.push_back(time_once(run_iallreduce));
        }
      }
    }
    const double t_atoll = median(atoll), t_raw = median(raw), t_nb = median(nonblocking);
    const double bus_gb = 2.0 * (p - 1) / p * static_cast<double>(bytes) / 1e9;
    // The ratio pairs each round's two times: this VM's memory bandwidth jumps between phases
    // (5.5 vs 12-14 GB/s at 1 MiB from one run to the next), and a median of times taken over a
    // phase change can land in different phases for the two variants; a round sees one phase.
    std::vector<double> round_ratios;  // bandwidth ratio: inverse of the time ratio
    for (int i = 0; i < reps; ++i) round_ratios.push_back(raw[i] / atoll[i]);
    const double ratio = median(round_ratios);
    if (bytes >= (1 << 20)) {
      min_ratio = std::min(min_ratio, ratio);
      sum_ratio += ratio;
      ++large_sizes;
    }
    if (root)
      std::printf("%10lld %6d | %10.1f %10.2f | %10.1f %10.2f | %10.1f %10.2f | %11.3f\n",
                  static_cast<long long>(bytes), reps, t_atoll * 1e6, bus_gb / t_atoll, t_raw * 1e6,
                  bus_gb / t_raw, t_nb * 1e6, bus_gb / t_nb, ratio);
  }
  if (root)
    std::printf("allreduce >= 1 MiB: Atoll/raw bandwidth ratio min %.3f mean %.3f (target >= 0.95)\n",
                min_ratio, sum_ratio / large_sizes);
  return 0;
}
