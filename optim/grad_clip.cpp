#include "optim/grad_clip.h"

#include <ATen/ATen.h>

#include <cmath>

namespace atl::optim {
namespace {

double sum_of_squares(const at::Tensor& t) {
  return t.to(at::kDouble).pow(2).sum().item<double>();
}

}  // namespace

double global_grad_norm(const parallel::FlatParameters& params, comm::Communicator& model_group,
                        bool count_replicated) {
  at::NoGradGuard no_grad;
  double squares = 0.0;
  if (count_replicated) {
    squares = sum_of_squares(params.grads());
  } else {
    for (const parallel::FlatEntry& e : params.entries())
      if (!e.info.replicated_in_model_group) squares += sum_of_squares(e.grad);
  }
  at::Tensor total = at::full({1}, squares, at::TensorOptions().dtype(at::kDouble));
  model_group.all_reduce(total, comm::ReduceOp::kSum)->wait();
  return std::sqrt(total.item<double>());
}

double clip_gradients(const parallel::FlatParameters& params, double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1.0) return 1.0;
  at::NoGradGuard no_grad;
  params.grads().mul_(factor);
  return factor;
}

}  // namespace atl::optim
