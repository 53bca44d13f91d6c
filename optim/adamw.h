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
  // One pass of ATen's fused multi-tensor kernel (_fused_adamw_) in place of the ~9 elementwise
  // passes: the same update, rounded differently (not bit-identical to torch::optim::AdamW).
  bool fused = false;
  // With `fused`: clipping's scale applied inside that kernel (its grad_scale, which also writes the
  // scaled gradients back) instead of a pass of its own over the gradients first.
  bool fused_clip = false;
};

// A run of elements of the flat buffer that receives weight decay.
struct DecaySegment {
  int64_t offset;
  int64_t numel;
};

class FlatAdamW {
 public:
  // `values`: the segments of fp32 master weights this optimizer updates (the whole flat buffer, or
  // under ZeRO this rank's piece of each bucket); `grads`: one contiguous buffer of their total
  // length, in segment order. Decay segments and the moments use that concatenated coordinate.
  FlatAdamW(std::vector<at::Tensor> values, at::Tensor grads, std::vector<DecaySegment> decay,
            AdamWOptions options);

  // One update. `grad_factor` < 1 scales the gradients first (clipping: optim::clip_factor); the
  // gradients hold the scaled values afterwards, either way.
  void step(double lr, double grad_factor = 1.0);

  int64_t steps_taken() const { return step_; }
  // Resuming: the steps already taken (bias correction), after the moments have been loaded.
  void restore_steps_taken(int64_t steps) { step_ = steps; }
  const at::Tensor& exp_avg() const { return exp_avg_; }
  const at::Tensor& exp_avg_sq() const { return exp_avg_sq_; }
  uint64_t state_bytes() const { return exp_avg_.nbytes() + exp_avg_sq_.nbytes(); }

 private:
  std::vector<at::Tensor> values_;
  std::vector<int64_t> value_offsets_;  // where each segment starts in the concatenation
  at::Tensor grads_, exp_avg_, exp_avg_sq_;
  std::vector<DecaySegment> decay_;
  AdamWOptions options_;
  int64_t step_ = 0;

  // The fused path: the update's tensors as runs of one weight decay each (views into the above).
  struct Runs {
    std::vector<at::Tensor> values, grads, exp_avg, exp_avg_sq;
    std::vector<at::Tensor> steps;  // step_count_ once per run: the kernel takes a step per tensor
  };
  void build_fused_runs();
  // `kernel_grad_factor` != 1: the kernel scales the gradients (fused_clip).
  void fused_step(double lr, double kernel_grad_factor);
  Runs decayed_, undecayed_;
  at::Tensor step_count_;  // fp32 on the device: the kernel reads the bias-correction step from it
  at::Tensor grad_scale_;  // fp32 on the device: the kernel divides the gradients by it (fused_clip)
};

}  // namespace atl::optim
