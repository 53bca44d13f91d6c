#include "optim/grad_clip.h"

#include <ATen/ATen.h>

#include <algorithm>
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
  // Each parameter counts once in the model group: tp-replicated ones on tp rank 0 only, a
  // pipeline stage's copy of another stage's parameter (tied embedding) never.
  const auto counted = [count_replicated](const parallel::FlatEntry& e) {
    return !e.info.duplicate && (count_replicated || !e.info.replicated_in_model_group);
  };
  const auto& entries = params.entries();
  double squares = 0.0;
  if (std::all_of(entries.begin(), entries.end(), counted)) {
    squares = sum_of_squares(params.grads());
  } else {
    for (const parallel::FlatEntry& e : entries)
      if (counted(e)) squares += sum_of_squares(e.grad);
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
