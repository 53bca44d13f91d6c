// Where this rank sits on its node, read from the launcher's environment (Open MPI, Slurm or PMIx),
// and what follows from it: the default thread count and the CUDA device of the rank.
#pragma once

#include <functional>
#include <string>

namespace atl::comm {
class MpiCommunicator;
}  // namespace atl::comm

namespace atl::runtime {

// Where this process sits on its node, as the launcher tells it. Fields the environment does not
// give (or gives malformed) are -1.
struct RankPlacement {
  int local_rank = -1;  // this rank's index among the ranks on its node
  int local_size = -1;  // how many ranks share the node
  int node = -1;        // the node's index in the allocation
  std::string source;   // "Open MPI", "Slurm", "PMIx", or "" when none of them is set
};

// Looks a variable up, nullptr when unset: std::getenv, or a fake in tests.
using Environment = std::function<const char*(const char*)>;

// Slurm when SLURM_LOCALID is set (srun launch), else Open MPI, else PMIx. Never throws.
RankPlacement placement_from_environment(const Environment& env);

// Threads per rank for run.threads = 0: cores / ranks on the node, at least 1. An unknown
// (< 1) local_size counts as one rank.
int threads_per_rank(int cores, int local_size);

// `placement` with local_rank and local_size counted over `world`'s ranks on this node where the
// launcher did not give them (collective then; a launcher gives them to every rank or to none).
RankPlacement completed_placement(const comm::MpiCommunicator& world, RankPlacement placement);

// threads_per_rank() for this node's cores and the ranks on it: as `placement` says, else counted
// over `world` (collective then).
int default_threads_per_rank(const comm::MpiCommunicator& world, const RankPlacement& placement);

// The CUDA device of this rank: local_rank % devices. An unknown local_rank maps to device 0;
// devices < 1 counts as one device.
int device_for(int local_rank, int devices);

}  // namespace atl::runtime
