// The global order of training sequences (DESIGN §8). It depends only on (seed, epoch) and the
// number of sequences -- never on the number of ranks -- so changing the data-parallel size keeps
// the data stream, and the cursor (a global position) is layout-free for checkpoints.
#pragma once

#include <cstdint>

namespace atl::runtime {

// Each epoch's permutation is computed, not stored: a keyed Feistel network on the smallest
// power-of-four domain that holds the sequences, cycle-walked back into [0, num_samples). Memory
// stays constant however many sequences there are, and any position is O(1) to look up.
class SampleOrder {
 public:
  // std::invalid_argument when num_samples < 1.
  SampleOrder(int64_t num_samples, uint64_t seed);

  int64_t num_samples() const { return num_samples_; }
  // The sequence index at position `global_position` of the endless stream: epoch e =
  // position / num_samples walks a permutation keyed by (seed, e). std::out_of_range for a
  // negative position.
  int64_t sample_at(int64_t global_position) const;

 private:
  uint64_t permute(uint64_t x, uint64_t key) const;

  int64_t num_samples_;
  uint64_t seed_;
  int half_bits_;  // the Feistel domain is [0, 2^(2 * half_bits_))
};

// Positions [first, first + count) of the global stream that data-parallel rank `dp_rank` of
// `dp_size` consumes in microbatch `micro` of `microbatches` at optimizer step `step`: the step
// owns positions [step * global_batch, (step + 1) * global_batch); each dp rank takes a contiguous
// slice of global_batch / dp_size, each microbatch a contiguous sub-slice of that.
// std::invalid_argument unless dp_size * microbatches divides global_batch; std::out_of_range for a
// rank, microbatch or step outside its range.
struct BatchSlice {
  int64_t first;
  int64_t count;
};
BatchSlice batch_slice(int64_t step, int global_batch, int dp_rank, int dp_size, int micro, int microbatches);

}  // namespace atl::runtime
