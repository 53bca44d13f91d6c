#include "runtime/data/blend.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace atl::runtime {

BlendWalk::BlendWalk(const std::vector<double>& weights) : weights_(weights), drawn_(weights.size(), 0) {
  if (weights.empty()) throw std::invalid_argument("BlendWalk: no datasets");
  for (double w : weights)
    if (!(w > 0)) throw std::invalid_argument("BlendWalk: weight " + std::to_string(w) + " is not positive");
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights_) w /= total;
}

BlendWalk::Draw BlendWalk::at(int64_t position) {
  if (position < 0) throw std::out_of_range("BlendWalk: negative position " + std::to_string(position));
  if (position < next_) {
    std::fill(drawn_.begin(), drawn_.end(), 0);
    next_ = 0;
  }
  for (;; ++next_) {
    // In double, as Megatron computes it, so that both pick the same dataset at every position.
    const double target = std::max(static_cast<double>(next_), 1.0);
    int best = 0;
    double best_error = weights_[0] * target - static_cast<double>(drawn_[0]);
    for (size_t d = 1; d < weights_.size(); ++d) {
      const double error = weights_[d] * target - static_cast<double>(drawn_[d]);
      if (error > best_error) {
        best_error = error;
        best = static_cast<int>(d);
      }
    }
    if (next_ == position) {
      const Draw draw{best, drawn_[static_cast<size_t>(best)]++};
      ++next_;
      return draw;
    }
    ++drawn_[static_cast<size_t>(best)];
  }
}

}  // namespace atl::runtime
