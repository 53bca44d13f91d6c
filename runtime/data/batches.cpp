#include "runtime/data/batches.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace atl::runtime {

TrainingData open_training_data(const std::string& train_path, const std::string& val_path, int seq,
                                int vocab, uint64_t seed, int eval_every, int eval_sequences) {
  TrainingData data{std::make_unique<SequenceSource>(train_path, seq, vocab, seed),
                    std::make_unique<SequenceSource>(val_path, seq, vocab, seed)};
  if (eval_every > 0 && data.val->num_sequences() < eval_sequences)
    throw std::invalid_argument("train.eval_sequences = " + std::to_string(eval_sequences) + " but " +
                                val_path + " holds only " + std::to_string(data.val->num_sequences()) +
                                " sequences of model.seq + 1 tokens; lower train.eval_sequences");
  return data;
}
namespace {

int64_t sequences_in(const TokenShard& shard, int seq, const std::string& path) {
  const int64_t n = (shard.size() - 1) / seq;
  if (n < 1)
    throw std::runtime_error("data: " + path + " holds " + std::to_string(shard.size()) +
                             " tokens, fewer than one sequence of model.seq + 1 = " +
                             std::to_string(seq + 1) + "; use a larger shard or a smaller model.seq");
  return n;
}

}  // namespace

SequenceSource::SequenceSource(const std::string& path, int seq, int vocab, uint64_t seed)
    : shard_(path), seq_(seq), order_(sequences_in(shard_, seq, path), seed) {
  const uint32_t max_token = shard_.max_token();
  if (max_token >= static_cast<uint32_t>(vocab))
    throw std::runtime_error("data: " + path + " contains token id " + std::to_string(max_token) +
                             " but model.vocab = " + std::to_string(vocab) +
                             "; set model.vocab to at least " + std::to_string(max_token + 1) +
                             " or re-tokenize the data");
}

template <typename IndexOf>
TokenBatch SequenceSource::gather(int64_t count, IndexOf index_of) const {
  at::Tensor windows = at::empty({count, seq_ + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) shard_.read(index_of(i) * seq_, seq_ + 1, out + i * (seq_ + 1));
  return {windows.narrow(1, 0, seq_).contiguous(), windows.narrow(1, 1, seq_).contiguous()};
}

TokenBatch SequenceSource::shuffled(int64_t first, int64_t count) {
  return gather(count, [&](int64_t i) { return order_.sample_at(first + i); });
}

TokenBatch SequenceSource::in_order(int64_t first, int64_t count) const {
  if (first + count > order_.num_samples())
    throw std::out_of_range("data: " + shard_.path() + " holds " + std::to_string(order_.num_samples()) +
                            " sequences, asked for [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ")");
  return gather(count, [&](int64_t i) { return first + i; });
}

}  // namespace atl::runtime
