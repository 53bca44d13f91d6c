#include "runtime/placement.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#include "comm/string_gather.h"
#include "runtime/device.h"
#include "runtime/host/usable_cpus.h"

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

// One rank's share of the node gather: "LOCAL_RANK\nCPU,CPU,...\nGPU,GPU,..." (GPU identities hold
// no comma or newline: UUIDs, or entries of comma-separated lists).
std::string node_rank_record(int local_rank, const NodeRank& rank) {
  std::string record = std::to_string(local_rank) + "\n";
  for (size_t i = 0; i < rank.cpus.size(); ++i) record += (i ? "," : "") + std::to_string(rank.cpus[i]);
  record += "\n";
  for (size_t i = 0; i < rank.gpus.size(); ++i) record += (i ? "," : "") + rank.gpus[i];
  return record;
}

std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

// A record back: its local rank (-1 when malformed) and what the rank may use.
std::pair<int, NodeRank> parse_node_rank_record(const std::string& record) {
  std::istringstream in(record);
  std::string local_rank, cpus, gpus;
  std::getline(in, local_rank);
  std::getline(in, cpus);
  std::getline(in, gpus);
  NodeRank rank;
  for (const std::string& cpu : comma_list(cpus)) {
    const std::optional<int> id = parse_count(cpu.data(), cpu.data() + cpu.size());
    if (!id) return {-1, {}};
    rank.cpus.push_back(*id);
  }
  rank.gpus = comma_list(gpus);
  const std::optional<int> index = parse_count(local_rank.data(), local_rank.data() + local_rank.size());
  return {index.value_or(-1), rank};
}

bool share_a_cpu(const std::vector<int>& a, const std::vector<int>& b) {
  // Both ascending (usable_cpu_ids).
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
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
  const auto value = [&env](const char* name) {
    const char* text = env(name);
    return std::string(text ? text : "");
  };
  p.gpu_variables = {value("CUDA_VISIBLE_DEVICES"), value("SLURM_STEP_GPUS"), value("SLURM_JOB_GPUS")};
  return p;
}

int threads_per_rank(int cpus, int sharing) {
  return std::max(1, cpus / std::max(1, sharing));
}

int ranks_sharing_cpus(const std::vector<NodeRank>& node_ranks, int local_rank) {
  if (local_rank < 0 || local_rank >= static_cast<int>(node_ranks.size())) return 1;
  const std::vector<int>& mine = node_ranks[static_cast<size_t>(local_rank)].cpus;
  int sharing = 0;
  for (const NodeRank& rank : node_ranks) sharing += share_a_cpu(rank.cpus, mine) ? 1 : 0;
  return std::max(1, sharing);
}

int threads_for(const RankPlacement& placement) {
  const int known = static_cast<int>(placement.node_ranks.size());
  if (placement.local_rank >= 0 && placement.local_rank < known) {
    const std::vector<int>& cpus = placement.node_ranks[static_cast<size_t>(placement.local_rank)].cpus;
    return threads_per_rank(
        placement.compute_cpus > 0 ? placement.compute_cpus : static_cast<int>(cpus.size()),
        ranks_sharing_cpus(placement.node_ranks, placement.local_rank));
  }
  return threads_per_rank(usable_cores(), placement.local_size);
}

int device_for(int local_rank, int devices) {
  return std::max(0, local_rank) % std::max(1, devices);
}

RankPlacement completed_placement(const comm::MpiCommunicator& world, RankPlacement placement) {
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
  if (placement.local_rank < 0 || placement.local_size < 1) {
    MPI_Comm_rank(node, &placement.local_rank);
    MPI_Comm_size(node, &placement.local_size);
  }
  placement.compute_cpus = usable_cores();
  const NodeRank mine{usable_cpu_ids(), visible_gpu_identities(placement.gpu_variables)};
  const std::vector<std::string> records =
      comm::all_gather_strings(node, node_rank_record(placement.local_rank, mine));
  MPI_Comm_free(&node);
  // In local-rank order; kept only when the launcher's local ranks number the node's ranks
  // 0..local_size-1, as the node communicator counts them.
  std::vector<NodeRank> ranks(records.size());
  std::vector<bool> seen(records.size(), false);
  bool numbered = static_cast<int>(records.size()) == placement.local_size;
  for (const std::string& record : records) {
    auto [local_rank, rank] = parse_node_rank_record(record);
    if (local_rank < 0 || local_rank >= static_cast<int>(ranks.size()) ||
        seen[static_cast<size_t>(local_rank)]) {
      numbered = false;
      break;
    }
    seen[static_cast<size_t>(local_rank)] = true;
    ranks[static_cast<size_t>(local_rank)] = std::move(rank);
  }
  if (numbered) placement.node_ranks = std::move(ranks);
  return placement;
}

int default_threads_per_rank(const comm::MpiCommunicator& world, const RankPlacement& placement) {
  const bool placed = placement.local_rank >= 0 && placement.local_size >= 1;
  return threads_for(placed ? placement : completed_placement(world, placement));
}

}  // namespace atl::runtime
