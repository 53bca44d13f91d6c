#include "runtime/data/sample_order.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace atl::runtime {
namespace {

// splitmix64: a tiny, well-mixed generator whose output is the same on every platform (unlike
// std:: distributions, whose algorithms differ between standard libraries).
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

SampleOrder::SampleOrder(int64_t num_samples, uint64_t seed) : num_samples_(num_samples), seed_(seed) {
  if (num_samples < 1) throw std::invalid_argument("SampleOrder: need at least one sample");
}

int64_t SampleOrder::sample_at(int64_t global_position) {
  if (global_position < 0)
    throw std::out_of_range("SampleOrder: negative stream position " + std::to_string(global_position));
  const int64_t epoch = global_position / num_samples_;
  if (epoch != cached_epoch_) {
    permutation_.resize(static_cast<size_t>(num_samples_));
    std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
    uint64_t state = seed_ ^ (static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull);
    // Fisher-Yates; the modulo bias (< 2^-40 for any realistic shard) does not matter here.
    for (int64_t i = num_samples_ - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
      std::swap(permutation_[static_cast<size_t>(i)], permutation_[static_cast<size_t>(j)]);
    }
    cached_epoch_ = epoch;
  }
  return permutation_[static_cast<size_t>(global_position % num_samples_)];
}

BatchSlice batch_slice(int64_t step, int global_batch, int dp_rank, int dp_size, int micro,
                       int microbatches) {
  // The config validation guarantees these; a violation here is a caller bug, not bad input.
  if (dp_size < 1 || microbatches < 1 || global_batch % (dp_size * microbatches) != 0)
    throw std::invalid_argument("batch_slice: global_batch " + std::to_string(global_batch) +
                                " is not divisible by dp " + std::to_string(dp_size) + " x microbatches " +
                                std::to_string(microbatches));
  if (dp_rank < 0 || dp_rank >= dp_size || micro < 0 || micro >= microbatches || step < 0)
    throw std::out_of_range("batch_slice: step " + std::to_string(step) + ", dp rank " +
                            std::to_string(dp_rank) + " of " + std::to_string(dp_size) + ", microbatch " +
                            std::to_string(micro) + " of " + std::to_string(microbatches));
  const int64_t per_rank = global_batch / dp_size;
  const int64_t per_micro = per_rank / microbatches;
  return {step * global_batch + dp_rank * per_rank + micro * per_micro, per_micro};
}

}  // namespace atl::runtime
