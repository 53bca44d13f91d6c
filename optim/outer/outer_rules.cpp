#include "optim/outer/outer_rules.h"

#include <ATen/ATen.h>

namespace atl::optim::outer {

void outer_sgd_step(at::Tensor& phi, at::Tensor& momentum, const at::Tensor& mean_delta,
                    const OuterSgdOptions& options) {
  // torch.optim.SGD's order of operations (dampening 0), so results match it bit for bit.
  momentum.mul_(options.momentum).add_(mean_delta);
  if (options.nesterov)
    phi.sub_(mean_delta.add(momentum, options.momentum), options.lr);
  else
    phi.sub_(momentum, options.lr);
}

void noloco_step(at::Tensor& phi, at::Tensor& delta, const at::Tensor& group_mean_phi,
                 const at::Tensor& group_mean_progress, const NoLoCoOptions& options) {
  delta.mul_(options.momentum)
      .add_(group_mean_progress, options.lr)
      .sub_(phi - group_mean_phi, options.gamma);
  phi.add_(delta);
}

}  // namespace atl::optim::outer
