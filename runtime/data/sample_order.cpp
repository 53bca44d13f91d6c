#include "runtime/data/sample_order.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace atl::runtime {
namespace {

// splitmix64's finalizer: a tiny, well-mixed function whose output is the same on every platform
// (unlike std:: distributions, whose algorithms differ between standard libraries).
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Six rounds: a keyed Feistel network is a pseudo-random permutation from four rounds on; two more
// leave no visible structure in orders of a few sequences.
constexpr int kFeistelRounds = 6;

}  // namespace

SampleOrder::SampleOrder(int64_t num_samples, uint64_t seed) : num_samples_(num_samples), seed_(seed) {
  if (num_samples < 1) throw std::invalid_argument("SampleOrder: need at least one sample");
  // Half of the bits that hold num_samples - 1, rounded up: the domain is under 4x num_samples, so
  // cycle walking takes fewer than 4 steps on average. At least 1 so that 2 samples can swap.
  const int bits = std::bit_width(static_cast<uint64_t>(num_samples - 1));
  half_bits_ = std::max(1, (bits + 1) / 2);
}

uint64_t SampleOrder::permute(uint64_t x, uint64_t key) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int round = 0; round < kFeistelRounds; ++round) {
    const uint64_t f = mix64(key ^ mix64(right + static_cast<uint64_t>(round) * 0xD6E8FEB86659FD93ull));
    const uint64_t next = left ^ (f & mask);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

int64_t SampleOrder::sample_at(int64_t global_position) const {
  if (global_position < 0)
    throw std::out_of_range("SampleOrder: negative stream position " + std::to_string(global_position));
  const int64_t epoch = global_position / num_samples_;
  const uint64_t key = mix64(seed_ ^ (static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull));
  // Cycle walking: a permutation of the larger domain, applied until it lands inside
  // [0, num_samples), is a permutation of [0, num_samples).
  uint64_t x = static_cast<uint64_t>(global_position % num_samples_);
  do {
    x = permute(x, key);
  } while (x >= static_cast<uint64_t>(num_samples_));
  return static_cast<int64_t>(x);
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
