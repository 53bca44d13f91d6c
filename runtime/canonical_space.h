// Where each rank's outer-optimizer values lie in the canonical parameter space (issue 19:
// islands of different layouts average there; optim/outer/canonical_average.h). A fragment's
// canonical space is its parameters' whole tensors (global shape, vocabulary unpadded) in forward
// order, flattened; a rank's elements map there through its tensor-parallel piece of each parameter
// and its ZeRO shard of the flat buffers -- the boxes its checkpoints are written in.
#pragma once

#include <vector>

#include "optim/outer/canonical_average.h"
#include "optim/outer/outer_optimizer.h"
#include "runtime/config/config.h"
#include "runtime/parallelize.h"

namespace atl::runtime {

// For each of `fragments` (spans of this rank's optimizer values, as the outer optimizer holds
// them): the canonical index of every element, and whether this rank contributes it -- each
// canonical element exactly once per island: tp-replicated parameters on tp rank 0, replicas under
// ZeRO-0 on dp rank 0, tied copies on a later stage never.
std::vector<optim::outer::CanonicalFragment> canonical_fragments(
    const Config& config, const ParallelLayout& layout,
    const std::vector<std::vector<optim::outer::ValueSpan>>& fragments);

}  // namespace atl::runtime
