// Batches of training and validation sequences cut from a token shard.
//
// A sequence is a window of seq + 1 tokens (inputs, and targets shifted by one). Training takes
// sequences in the global order of SampleOrder, which depends only on (seed, epoch), so every
// data-parallel layout sees the same stream; validation takes them in file order from the start.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/data/sample_order.h"
#include "runtime/data/token_shard.h"

namespace atl::runtime {

struct TokenBatch {
  at::Tensor inputs;   // int64 [count, seq]
  at::Tensor targets;  // int64 [count, seq]
};

class SequenceSource {
 public:
  // Throws std::runtime_error (one line naming the file and the fix) when the shard is invalid,
  // holds a token >= vocab, or is too short for one sequence.
  SequenceSource(const std::string& path, int seq, int vocab, uint64_t seed);

  int64_t num_sequences() const { return order_.num_samples(); }
  // Sequences at global stream positions [first, first + count).
  TokenBatch shuffled(int64_t first, int64_t count);
  // Sequences [first, first + count) in file order.
  TokenBatch in_order(int64_t first, int64_t count) const;

 private:
  template <typename IndexOf>
  TokenBatch gather(int64_t count, IndexOf index_of) const;

  TokenShard shard_;
  int seq_;
  SampleOrder order_;
};

// The sequences a run reads: training shuffled per step, validation in file order.
struct TrainingData {
  std::unique_ptr<SequenceSource> train, val;
};

// Opens `train_path` and `val_path` as sequences of `seq` + 1 tokens below `vocab`. Throws
// std::invalid_argument when validation is on (`eval_sequences` > 0 every `eval_every` > 0 steps)
// and the validation shard holds fewer sequences.
TrainingData open_training_data(const std::string& train_path, const std::string& val_path, int seq,
                                int vocab, uint64_t seed, int eval_every, int eval_sequences);

}  // namespace atl::runtime
