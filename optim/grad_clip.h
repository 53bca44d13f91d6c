// Global gradient-norm clipping (DESIGN §5): the L2 norm over every parameter of the model,
// counting each parameter once even when it is replicated across tensor-parallel ranks, summed
// over the model group (tp x pp). Gradients are already averaged over dp when this runs, so the
// dp replicas agree without communicating.
#pragma once

#include "comm/communicator.h"
#include "parallel/flat_parameters.h"

namespace atl::optim {

// Sum of squares is accumulated in fp64. `count_replicated`: whether this rank contributes the
// parameters marked replicated_in_model_group (true on exactly one rank of each replica set, e.g.
// tp rank 0).
double global_grad_norm(const parallel::FlatParameters& params, comm::Communicator& model_group,
                        bool count_replicated);

// Scales the gradients by max_norm / (norm + 1e-6) when that is below 1; returns the factor used.
double clip_gradients(const parallel::FlatParameters& params, double norm, double max_norm);

}  // namespace atl::optim
