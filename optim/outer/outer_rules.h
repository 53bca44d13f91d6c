// The update rules of the outer optimizers (DESIGN §6) as plain tensor arithmetic, free of
// communication so they can be checked against their closed forms.
//
// DiLoCo (Douillard et al. 2023): Delta = phi - theta is the pseudo-gradient, averaged over islands;
// outer SGD with momentum mu and learning rate lr:   b = mu*b + Delta;
//   Nesterov:     phi -= lr * (Delta + mu*b)
//   heavy ball:   phi -= lr * b
// With lr 0.7, mu 0.9 and Delta = 1 every round, Nesterov steps by 1.33, then 1.897, ...
//
// NoLoCo (Gensyn 2025): no all-reduce; each island meets a small group and averages with it.
// Delta = theta - phi here (the direction the inner steps went), and with the group means
//   delta = a*delta + b*mean(Delta) - g*(phi - mean(phi));   phi += delta
// (the +b follows the paper's appendix and code; its eq. 2 has the sign wrong). Summed over all
// islands the pull term cancels, so the global mean of phi moves exactly as heavy-ball DiLoCo with
// lr b and momentum a would, whatever the grouping.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::optim::outer {

struct OuterSgdOptions {
  double lr = 0.7;
  double momentum = 0.9;
  bool nesterov = true;
};

// In place on `phi` and `momentum` (fp32, same shape as `mean_delta`).
void outer_sgd_step(at::Tensor& phi, at::Tensor& momentum, const at::Tensor& mean_delta,
                    const OuterSgdOptions& options);

struct NoLoCoOptions {
  double lr = 0.7;        // b
  double momentum = 0.5;  // a
  double gamma = 0.7;     // g
};

// In place on `phi` and `delta` (the NoLoCo momentum), given the group means of phi and of
// Delta = theta - phi.
void noloco_step(at::Tensor& phi, at::Tensor& delta, const at::Tensor& group_mean_phi,
                 const at::Tensor& group_mean_progress, const NoLoCoOptions& options);

}  // namespace atl::optim::outer
