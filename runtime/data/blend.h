// Which dataset each position of a blended stream draws from: Megatron's rule
// (megatron/core/datasets/helpers.cpp, build_blending_indices). Position i goes to the dataset
// furthest behind its share, weight * max(i, 1) - drawn so far (the first such on a tie), so each
// dataset's count stays within one sequence of its share. It depends only on the weights.
//
// The walk keeps one count per dataset, not an index per position: going forward is O(datasets) a
// position; a position behind the walk restarts it from 0.
#pragma once

#include <cstdint>
#include <vector>

namespace atl::runtime {

class BlendWalk {
 public:
  // `weights`: one per dataset, each > 0 (normalised here); std::invalid_argument otherwise.
  explicit BlendWalk(const std::vector<double>& weights);

  struct Draw {
    int dataset;    // which dataset
    int64_t index;  // how many this dataset gave before: its own stream position
  };
  // What position `position` (>= 0) of the blended stream draws.
  Draw at(int64_t position);

  const std::vector<double>& weights() const { return weights_; }

 private:
  std::vector<double> weights_;
  std::vector<int64_t> drawn_;  // per dataset, over positions [0, next_)
  int64_t next_ = 0;
};

}  // namespace atl::runtime
