// Islands of different layouts averaging in the canonical space: the rank-by-rank exchange
// (optim/outer/sliced_average.h) against the leader path (optim/outer/canonical_average.h), in one
// run on the same values (checked to give the same bits). Per rank: bytes sent to other islands,
// bytes moved inside the island, and the peak host memory the average added (VmHWM reset before
// each average, less the resident size before it; large buffers are mmapped so each path's frees
// return to the system). Run under mpirun:
//   mpirun -np 8 build/bin/bench_island_slices [ISLAND_RANKS=4,4] [MILLIONS=16] [CODEC=int8]
// The islands' ranks each own a scrambled 1/R of the canonical fragment (as tp x dp with ZeRO
// shards do). Both paths run over MPI here (between islands the real jobs use Gloo over TCP):
// bytes and memory are the figures, times on a shared host only indicative.
#include <malloc.h>
#include <mpi.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/mpi_runtime.h"
#include "optim/outer/canonical_average.h"
#include "optim/outer/island_exchange.h"
#include "optim/outer/sliced_average.h"

namespace {

namespace outer = atl::optim::outer;

// The process's resident size and its high-water mark, in bytes (/proc/self/status).
std::pair<int64_t, int64_t> resident_and_peak() {
  std::ifstream status("/proc/self/status");
  std::string line;
  int64_t rss = 0, hwm = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stoll(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stoll(line.substr(6)) * 1024;
  }
  return {rss, hwm};
}

// Resets the high-water mark to the resident size now.
void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

outer::Codec parse_codec(const std::string& name) {
  for (outer::Codec c : {outer::Codec::kNone, outer::Codec::kFp16, outer::Codec::kBf16, outer::Codec::kInt8,
                         outer::Codec::kInt4})
    if (name == outer::codec_name(c)) return c;
  throw std::invalid_argument("codec " + name + ": none, fp16, bf16, int8 or int4");
}

struct Figures {
  uint64_t between = 0, inside = 0;
  int64_t peak = 0;
  double seconds = 0;
  at::Tensor mean;
};

// One average of `values` through `average`, measured on this rank.
template <typename Average>
Figures measure(Average& average, const at::Tensor& values, atl::comm::Communicator& island_ranks,
                const std::function<uint64_t()>& between) {
  MPI_Barrier(MPI_COMM_WORLD);
  const uint64_t between_before = between(), inside_before = island_ranks.bytes().total_bytes();
  reset_peak();
  const int64_t before = resident_and_peak().first;
  const auto start = std::chrono::steady_clock::now();
  Figures f;
  f.mean = average.average(values, 1.0, 0);
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.peak = resident_and_peak().second - before;
  f.between = between() - between_before;
  f.inside = island_ranks.bytes().total_bytes() - inside_before;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  // Buffers of 1 MiB and more are mmapped and unmapped on free: the second path starts from what
  // the first held before it, and each peak is its own.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  atl::comm::MpiRuntime runtime(&argc, &argv);
  auto world = runtime.world();
  const std::vector<int> ranks = parse_ranks(argc > 1 ? argv[1] : "4,4");
  const int64_t n = static_cast<int64_t>((argc > 2 ? std::stod(argv[2]) : 16.0) * 1e6);
  const outer::Codec codec = parse_codec(argc > 3 ? argv[3] : "int8");
  if (std::accumulate(ranks.begin(), ranks.end(), 0) != world->size()) {
    if (world->rank() == 0) std::fprintf(stderr, "the islands' ranks must add up to mpirun's -np\n");
    return 2;
  }
  int island = 0, first = 0;
  while (first + ranks[static_cast<size_t>(island)] <= world->rank())
    first += ranks[static_cast<size_t>(island++)];
  const int local = world->rank() - first, r = ranks[static_cast<size_t>(island)];
  auto island_ranks = world->split(island, local, "island ranks");
  auto leaders = world->split(local == 0 ? 0 : 1 + world->rank(), island, "islands");

  at::manual_seed(11 + island);
  const at::Tensor perm = at::randperm(n, at::kLong);
  const atl::comm::ShardRange own = atl::comm::shard_range(n, r, local);
  outer::CanonicalFragment fragment;
  fragment.numel = n;
  fragment.index = perm.narrow(0, own.offset, own.numel).clone();
  fragment.owned = at::ones({own.numel}, at::kBool);
  at::manual_seed(40 + world->rank());
  const at::Tensor values = at::randn({own.numel});

  outer::IslandExchange exchange(*leaders, codec, {});
  outer::CanonicalIslandAverage leader(*island_ranks, exchange, {fragment});
  outer::SlicedIslandAverage sliced(*island_ranks, *world, ranks, codec, {fragment});
  const Figures by_ranks = measure(sliced, values, *island_ranks, [&] { return sliced.bytes_sent(); });
  const Figures by_leader = measure(leader, values, *island_ranks, [&] { return exchange.bytes_sent(); });
  int same = by_ranks.mean.equal(by_leader.mean) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  const auto mib = [](double bytes) { return bytes / (1024.0 * 1024.0); };
  std::vector<double> row{static_cast<double>(island),
                          static_cast<double>(local),
                          mib(static_cast<double>(by_leader.between)),
                          mib(static_cast<double>(by_ranks.between)),
                          mib(static_cast<double>(by_leader.inside)),
                          mib(static_cast<double>(by_ranks.inside)),
                          mib(static_cast<double>(by_leader.peak)),
                          mib(static_cast<double>(by_ranks.peak)),
                          by_leader.seconds,
                          by_ranks.seconds};
  std::vector<double> rows(row.size() * static_cast<size_t>(world->size()));
  MPI_Gather(row.data(), static_cast<int>(row.size()), MPI_DOUBLE, rows.data(), static_cast<int>(row.size()),
             MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (world->rank() != 0) return 0;
  std::printf("canonical fragment of %.1fM fp32 elements (%.1f MiB), islands of",
              static_cast<double>(n) / 1e6, mib(4.0 * static_cast<double>(n)));
  for (int k : ranks) std::printf(" %d", k);
  std::printf(" ranks, codec %s; per rank: leader path -> rank by rank\n", outer::codec_name(codec));
  std::printf(
      "| island | rank | sent between islands (MiB) | moved inside the island (MiB) | peak host memory of "
      "the average (MiB) | seconds |\n|--:|--:|--:|--:|--:|--:|\n");
  double most[2] = {0, 0}, peak[2] = {0, 0};
  for (int g = 0; g < world->size(); ++g) {
    const double* v = &rows[static_cast<size_t>(g) * row.size()];
    std::printf("| %d | %d | %.2f -> %.2f | %.2f -> %.2f | %.1f -> %.1f | %.2f -> %.2f |\n",
                static_cast<int>(v[0]), static_cast<int>(v[1]), v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                v[9]);
    for (int p = 0; p < 2; ++p) {
      most[p] = std::max(most[p], v[2 + p]);
      peak[p] = std::max(peak[p], v[6 + p]);
    }
  }
  std::printf("busiest link between islands: %.2f MiB (leader) -> %.2f MiB (rank by rank), %.2fx less\n",
              most[0], most[1], most[0] / std::max(most[1], 1e-9));
  std::printf("the same means, bit for bit, on every rank: %s\n", same == 1 ? "yes" : "NO");
  std::printf(
      "largest peak host memory of the average: %.1f MiB (leader) -> %.1f MiB (rank by rank), %.2fx less\n",
      peak[0], peak[1], peak[0] / std::max(peak[1], 1e-9));
  return 0;
}
