#include "optim/adamw.h"

#include <ATen/ATen.h>

#include <cmath>

namespace atl::optim {

FlatAdamW::FlatAdamW(at::Tensor values, at::Tensor grads, std::vector<DecaySegment> decay,
                     AdamWOptions options)
    : values_(std::move(values)),
      grads_(std::move(grads)),
      exp_avg_(at::zeros_like(values_)),
      exp_avg_sq_(at::zeros_like(values_)),
      denom_(at::empty_like(values_)),
      decay_(std::move(decay)),
      options_(options) {}

void FlatAdamW::step(double lr) {
  at::NoGradGuard no_grad;
  ++step_;
  if (options_.weight_decay != 0.0) {
    for (const DecaySegment& s : decay_)
      values_.narrow(0, s.offset, s.numel).mul_(1.0 - lr * options_.weight_decay);
  }
  exp_avg_.mul_(options_.beta1).add_(grads_, 1.0 - options_.beta1);
  exp_avg_sq_.mul_(options_.beta2).addcmul_(grads_, grads_, 1.0 - options_.beta2);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  at::sqrt_out(denom_, exp_avg_sq_);
  denom_.div_(std::sqrt(bias_correction2)).add_(options_.eps);
  values_.addcdiv_(exp_avg_, denom_, -lr / bias_correction1);
}

}  // namespace atl::optim
