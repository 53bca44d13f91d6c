// Learning-rate schedules: linear warmup, then cosine decay to min_lr (default), constant, or
// WSD (warmup-stable-decay: constant until the last 20% of steps, then linear decay to min_lr).
#pragma once

#include <cstdint>

namespace atl::optim {

// What follows the warmup.
enum class LrDecay { kCosine, kConstant, kWsd };

struct LrSchedule {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup = 0;
  int64_t total_steps = 1;
  LrDecay decay = LrDecay::kCosine;

  // The learning rate of optimizer step `step` (0-based).
  double at(int64_t step) const;
};

}  // namespace atl::optim
