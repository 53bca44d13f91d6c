// Which GPU each rank on a node takes, given the GPUs each one sees: a matching between the node's
// ranks and its GPUs (by identity), so that every rank gets a GPU of its own wherever any
// assignment gives one. Taking the first free GPU in rank order is not enough: where rank 0 sees
// {A, B} and rank 1 sees {A}, rank 0 must leave A to rank 1.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace atl::runtime {

// For each rank on the node (in local-rank order; `node_gpus[r]` the identities of the GPUs rank r
// sees, in its device order), the index in its own list of the GPU it takes, or nullopt where no
// assignment leaves it a GPU of its own. A maximum matching (augmenting paths), deterministic: ranks
// in local-rank order each take the first free GPU they see and move a rank before them to another
// only when left without one -- so ranks that all see the same GPUs take them in order, and each
// rank that sees one GPU of its own takes it.
std::vector<std::optional<int>> assign_gpus(const std::vector<std::vector<std::string>>& node_gpus);

}  // namespace atl::runtime
