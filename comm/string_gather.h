// Every rank's text, gathered to every rank of a group: what the start-up agreements exchange
// (a rank's CPUs and GPUs on its node, each rank's device choice), which differ in length per rank.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace atl::comm {

// `mine` from every rank of `group`, in its rank order. Collective over `group`.
std::vector<std::string> all_gather_strings(MPI_Comm group, const std::string& mine);

}  // namespace atl::comm
