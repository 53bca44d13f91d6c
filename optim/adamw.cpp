#include "optim/adamw.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace atl::optim {

FlatAdamW::FlatAdamW(std::vector<at::Tensor> values, at::Tensor grads, std::vector<DecaySegment> decay,
                     AdamWOptions options)
    : values_(std::move(values)),
      grads_(std::move(grads)),
      exp_avg_(at::zeros_like(grads_)),
      exp_avg_sq_(at::zeros_like(grads_)),
      decay_(std::move(decay)),
      options_(options) {
  int64_t offset = 0;
  for (const at::Tensor& v : values_) {
    value_offsets_.push_back(offset);
    offset += v.numel();
  }
  if (offset != grads_.numel())
    throw std::invalid_argument("FlatAdamW: value segments hold " + std::to_string(offset) +
                                " elements but the gradients " + std::to_string(grads_.numel()));
  if (options_.fused) build_fused_runs();
}

void FlatAdamW::build_fused_runs() {
  // Where decay starts and stops along the concatenated coordinate, then each value segment cut there.
  std::vector<DecaySegment> decay = decay_;
  std::sort(decay.begin(), decay.end(),
            [](const DecaySegment& a, const DecaySegment& b) { return a.offset < b.offset; });
  auto add_run = [this](bool decayed, size_t segment, int64_t begin, int64_t end) {
    if (begin >= end) return;
    Runs& runs = decayed ? decayed_ : undecayed_;
    runs.values.push_back(values_[segment].narrow(0, begin - value_offsets_[segment], end - begin));
    runs.grads.push_back(grads_.narrow(0, begin, end - begin));
    runs.exp_avg.push_back(exp_avg_.narrow(0, begin, end - begin));
    runs.exp_avg_sq.push_back(exp_avg_sq_.narrow(0, begin, end - begin));
  };
  for (size_t i = 0; i < values_.size(); ++i) {
    const int64_t first = value_offsets_[i], last = first + values_[i].numel();
    int64_t at = first;
    for (const DecaySegment& d : decay) {
      const int64_t begin = std::max(d.offset, first), end = std::min(d.offset + d.numel, last);
      if (begin >= end) continue;
      add_run(false, i, at, begin);
      add_run(true, i, begin, end);
      at = end;
    }
    add_run(false, i, at, last);
  }
  step_count_ = at::zeros({}, grads_.options().dtype(at::kFloat));
  grad_scale_ = at::ones({}, grads_.options().dtype(at::kFloat));
  for (Runs* runs : {&decayed_, &undecayed_}) runs->steps.assign(runs->values.size(), step_count_);
}

void FlatAdamW::fused_step(double lr, double kernel_grad_factor) {
  step_count_.fill_(static_cast<double>(step_));
  std::optional<at::Tensor> grad_scale;
  if (kernel_grad_factor != 1.0) grad_scale = grad_scale_.fill_(1.0 / kernel_grad_factor);  // it divides
  for (const bool decayed : {true, false}) {
    Runs& runs = decayed ? decayed_ : undecayed_;
    if (runs.values.empty()) continue;
    at::_fused_adamw_(runs.values, runs.grads, runs.exp_avg, runs.exp_avg_sq, /*max_exp_avg_sqs=*/{},
                      runs.steps, lr, options_.beta1, options_.beta2, decayed ? options_.weight_decay : 0.0,
                      options_.eps,
                      /*amsgrad=*/false, /*maximize=*/false, grad_scale);
  }
}

void FlatAdamW::step(double lr, double grad_factor) {
  at::NoGradGuard no_grad;
  ++step_;
  const bool scales_in_kernel = options_.fused && options_.fused_clip;
  if (grad_factor != 1.0 && !scales_in_kernel) grads_.mul_(grad_factor);
  if (options_.fused) {
    fused_step(lr, scales_in_kernel ? grad_factor : 1.0);
    return;
  }
  // Decoupled weight decay on the decayed runs, each cut at segment boundaries.
  if (options_.weight_decay != 0.0) {
    for (const DecaySegment& d : decay_) {
      for (size_t i = 0; i < values_.size(); ++i) {
        const int64_t begin = std::max(d.offset, value_offsets_[i]);
        const int64_t end = std::min(d.offset + d.numel, value_offsets_[i] + values_[i].numel());
        if (begin < end)
          values_[i].narrow(0, begin - value_offsets_[i], end - begin).mul_(1.0 - lr * options_.weight_decay);
      }
    }
  }
  exp_avg_.mul_(options_.beta1).add_(grads_, 1.0 - options_.beta1);
  exp_avg_sq_.mul_(options_.beta2).addcmul_(grads_, grads_, 1.0 - options_.beta2);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  for (size_t i = 0; i < values_.size(); ++i) {
    const int64_t n = values_[i].numel();
    // The denominator is a temporary: keeping it would cost 4 more bytes per parameter of state.
    const at::Tensor denom = exp_avg_sq_.narrow(0, value_offsets_[i], n)
                                 .sqrt()
                                 .div_(std::sqrt(bias_correction2))
                                 .add_(options_.eps);
    values_[i].addcdiv_(exp_avg_.narrow(0, value_offsets_[i], n), denom, -lr / bias_correction1);
  }
}

}  // namespace atl::optim
