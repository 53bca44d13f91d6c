// Where this rank sits on its node, read from the launcher's environment (Open MPI, Slurm or PMIx),
// what the node's ranks may each use (CPUs, GPUs), and what follows from it: the default thread count
// and the CUDA device of the rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace atl::comm {
class MpiCommunicator;
}  // namespace atl::comm

namespace atl::runtime {

// The GPU variables of a rank's environment, as set ("" when unset): what the job asked for, and
// under Slurm which of the node's GPUs this rank was given.
struct GpuVariables {
  std::string cuda_visible_devices;  // CUDA_VISIBLE_DEVICES: the devices CUDA shows the process
  // SLURM_STEP_GPUS: the step's GPUs on this node by Slurm's node-wide index; with --gpus-per-task
  // or --gpu-bind, this task's own.
  std::string slurm_step_gpus;
  std::string slurm_job_gpus;  // SLURM_JOB_GPUS: the job's GPUs on this node (the batch script's)
};

// What one rank on a node may use, as completed_placement gathers it from each.
struct NodeRank {
  std::vector<int> cpus;          // the CPUs its affinity allows (usable_cpu_ids)
  std::vector<std::string> gpus;  // the GPUs it sees, in its device order, by identity (device.h)
};

// Where this process sits on its node, as the launcher tells it. Fields the environment does not
// give (or gives malformed) are -1.
struct RankPlacement {
  int local_rank = -1;  // this rank's index among the ranks on its node
  int local_size = -1;  // how many ranks share the node
  int node = -1;        // the node's index in the allocation
  std::string source;   // "Open MPI", "Slurm", "PMIx", or "" when none of them is set
  GpuVariables gpu_variables;
  // How many CPUs this rank's intra-op threads can keep busy, before sharing them with the node's
  // other ranks: the physical cores among those its affinity allows, within its cgroup's CPU quota
  // (usable_cores), from completed_placement; -1 before it.
  int compute_cpus = -1;
  // What each rank on the node may use, in local-rank order (node_ranks[local_rank] is this one),
  // from completed_placement; empty before it, or where the node's ranks do not number
  // 0..local_size-1 between them.
  std::vector<NodeRank> node_ranks;
};

// Looks a variable up, nullptr when unset: std::getenv, or a fake in tests.
using Environment = std::function<const char*(const char*)>;

// Slurm when SLURM_LOCALID is set (srun launch), else Open MPI, else PMIx; the GPU variables
// whichever launched it. Never throws.
RankPlacement placement_from_environment(const Environment& env);

// Threads for a rank that may run on `cpus` CPUs shared with `sharing` ranks (itself included):
// cpus / sharing, at least 1. An unknown (< 1) sharing counts as one rank.
int threads_per_rank(int cpus, int sharing);

// How many of the node's ranks (this one included) may run on a CPU this rank may run on: the
// ranks its threads compete with. Every rank on the node where each may use all of the node's
// CPUs (mpirun --bind-to none), 1 where Slurm bound each task to cores of its own. 1 for an empty
// `node_ranks` or a local_rank outside it.
int ranks_sharing_cpus(const std::vector<NodeRank>& node_ranks, int local_rank);

// Threads per rank for run.threads = 0, from `placement` alone: this rank's compute_cpus (where
// unknown, the CPUs its affinity allows) over the ranks sharing its CPUs where `placement` has
// node_ranks, else usable_cores() over local_size. Ranks that share CPUs are taken to share the
// cgroup's quota too (ranks of one container).
int threads_for(const RankPlacement& placement);

// `placement` completed over `world`'s ranks on this node: local_rank and local_size where the
// launcher did not give them (a launcher gives them to every rank or to none), compute_cpus, and
// node_ranks, what each rank on the node may use (its CPU affinity, the identities of the GPUs it
// sees). Collective:
// every rank of `world` calls it at once.
RankPlacement completed_placement(const comm::MpiCommunicator& world, RankPlacement placement);

// threads_for() `placement`, completed first (collectively) where it lacks local_rank or local_size.
int default_threads_per_rank(const comm::MpiCommunicator& world, const RankPlacement& placement);

// The CUDA device of this rank: local_rank % devices. An unknown local_rank maps to device 0;
// devices < 1 counts as one device.
int device_for(int local_rank, int devices);

}  // namespace atl::runtime
