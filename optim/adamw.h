// AdamW over one flat parameter buffer (DESIGN §6): the update is a handful of vectorised kernels
// over the whole model instead of one small loop per parameter. Decoupled weight decay applies
// only to the segments marked for it (norms are excluded). The arithmetic follows
// torch::optim::AdamW step for step, so the two agree to the last bit on the same inputs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace atl::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// A run of elements of the flat buffer that receives weight decay.
struct DecaySegment {
  int64_t offset;
  int64_t numel;
};

class FlatAdamW {
 public:
  // `values` and `grads` are flat buffers of the same size (fp32 master weights); the optimizer
  // keeps references and allocates its moments alongside.
  FlatAdamW(at::Tensor values, at::Tensor grads, std::vector<DecaySegment> decay, AdamWOptions options);

  void step(double lr);

  int64_t steps_taken() const { return step_; }
  const at::Tensor& exp_avg() const { return exp_avg_; }
  const at::Tensor& exp_avg_sq() const { return exp_avg_sq_; }

 private:
  at::Tensor values_, grads_, exp_avg_, exp_avg_sq_, denom_;
  std::vector<DecaySegment> decay_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace atl::optim
