#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace atl::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (decay == LrDecay::kConstant) return lr;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - 1 - warmup);
  const double progress =
      std::clamp(static_cast<double>(step - warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  if (decay == LrDecay::kCosine) return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  constexpr double kDecayFraction = 0.2;  // WSD: stable, then a linear decay over the last 20%
  const double into_decay = (progress - (1.0 - kDecayFraction)) / kDecayFraction;
  return into_decay <= 0.0 ? lr : lr + (min_lr - lr) * into_decay;
}

}  // namespace atl::optim
