// Global gradient-norm clipping (DESIGN §5): the L2 norm over every parameter of the model, each
// counted once -- parameters replicated across tensor-parallel ranks on one rank only, a pipeline
// stage's copy of another stage's parameter never -- summed over the groups that hold disjoint
// parts of the model: the model group (tp x pp), and under ZeRO the dp group too (each dp rank
// holds a different piece of the dp-averaged gradients). Without ZeRO the dp replicas agree
// without communicating.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "comm/communicator.h"

namespace atl::optim {

// The L2 norm of the concatenation of every rank's `pieces` over `groups` (sum of squares
// accumulated in fp64, all-reduced over each group in turn).
double global_grad_norm(const std::vector<at::Tensor>& pieces,
                        const std::vector<comm::Communicator*>& groups);

// The scale clipping applies to gradients of global norm `norm`: max_norm / (norm + 1e-6) when that
// is below 1, else 1 (also when max_norm is 0: clipping off). FlatAdamW::step applies it.
double clip_factor(double norm, double max_norm);

}  // namespace atl::optim
