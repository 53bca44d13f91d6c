#include "runtime/placement.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"

namespace atl::runtime {
namespace {

// A non-negative int spelled exactly by [first, last): no sign, blanks or trailing text.
std::optional<int> parse_count(const char* first, const char* last) {
  if (first == last || *first < '0' || *first > '9') return std::nullopt;
  int value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  if (error != std::errc() || end != last) return std::nullopt;
  return value;
}

// A variable's value as a count, at least `min`; -1 when unset or malformed.
int count_or_unknown(const Environment& env, const char* name, int min) {
  const char* text = env(name);
  if (!text) return -1;
  const std::optional<int> value = parse_count(text, text + std::strlen(text));
  return value && *value >= min ? *value : -1;
}

bool is_set(const Environment& env, const char* name) {
  return env(name) != nullptr;
}

// SLURM_TASKS_PER_NODE lists tasks per node in node order, runs compressed: "4(x2),3" is 4, 4, 3.
// Returns node `node`'s count, -1 when the list is malformed or shorter.
int slurm_tasks_on_node(const char* list, int node) {
  if (!list || node < 0) return -1;
  std::vector<std::pair<int, int>> runs;  // (tasks, nodes)
  const char* const end = list + std::strlen(list);
  for (const char* entry = list; entry <= end;) {
    const char* const comma = std::find(entry, end, ',');
    const char* const paren = std::find(entry, comma, '(');
    const std::optional<int> tasks = parse_count(entry, paren);
    std::optional<int> nodes = 1;
    if (paren != comma) {
      // "(xM)": at least two characters between '(' and ')' and the ')' closing the entry.
      if (comma - paren < 4 || paren[1] != 'x' || comma[-1] != ')') return -1;
      nodes = parse_count(paren + 2, comma - 1);
    }
    if (!tasks || *tasks < 1 || !nodes || *nodes < 1) return -1;
    runs.emplace_back(*tasks, *nodes);
    entry = comma + 1;
  }
  long long first_node = 0;
  for (const auto& [tasks, nodes] : runs) {
    if (node < first_node + nodes) return tasks;
    first_node += nodes;
  }
  return -1;
}

}  // namespace

RankPlacement placement_from_environment(const Environment& env) {
  RankPlacement p;
  if (is_set(env, "SLURM_LOCALID")) {
    p.source = "Slurm";
    p.local_rank = count_or_unknown(env, "SLURM_LOCALID", 0);
    p.node = count_or_unknown(env, "SLURM_NODEID", 0);
    p.local_size = slurm_tasks_on_node(env("SLURM_TASKS_PER_NODE"), p.node);
  } else if (is_set(env, "OMPI_COMM_WORLD_LOCAL_RANK") || is_set(env, "OMPI_COMM_WORLD_LOCAL_SIZE")) {
    // OMPI_COMM_WORLD_NODE_RANK is a rank within the node, not the node's index: Open MPI has none.
    p.source = "Open MPI";
    p.local_rank = count_or_unknown(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    p.local_size = count_or_unknown(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (is_set(env, "PMIX_LOCAL_RANK") || is_set(env, "PMIX_LOCAL_SIZE")) {
    p.source = "PMIx";
    p.local_rank = count_or_unknown(env, "PMIX_LOCAL_RANK", 0);
    p.local_size = count_or_unknown(env, "PMIX_LOCAL_SIZE", 1);
  }
  return p;
}

int threads_per_rank(int cores, int local_size) {
  return std::max(1, cores / std::max(1, local_size));
}

int device_for(int local_rank, int devices) {
  return std::max(0, local_rank) % std::max(1, devices);
}

RankPlacement completed_placement(const comm::MpiCommunicator& world, RankPlacement placement) {
  if (placement.local_rank >= 0 && placement.local_size >= 1) return placement;
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &placement.local_rank);
  MPI_Comm_size(node, &placement.local_size);
  MPI_Comm_free(&node);
  return placement;
}

int default_threads_per_rank(const comm::MpiCommunicator& world, const RankPlacement& placement) {
  return threads_per_rank(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
                          completed_placement(world, placement).local_size);
}

}  // namespace atl::runtime
