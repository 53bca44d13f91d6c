#include "runtime/data/batches.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "text/joined.h"

namespace atl::runtime {
namespace {

// Each dataset's shuffle has a key of its own, so two datasets of the same size are not read in
// the same order.
uint64_t dataset_seed(uint64_t seed, size_t dataset) {
  return seed + static_cast<uint64_t>(dataset) * 0x9E3779B97F4A7C15ull;
}

std::string paths_of(const DatasetList& sources) {
  std::vector<std::string> paths;
  for (const DatasetSource& source : sources) paths.push_back(source.path);
  return text::joined(paths, ", ");
}

}  // namespace

std::unique_ptr<SequenceSource> open_sequence_source(const DatasetList& sources, DataSplit split, int seq,
                                                     int vocab, uint64_t seed, DocumentMarkers markers) {
  std::vector<Dataset> datasets;
  std::vector<double> weights;
  for (const DatasetSource& source : sources) {
    datasets.push_back(open_dataset(source.path, split, seq));
    weights.push_back(source.weight);
  }
  return std::make_unique<SequenceSource>(std::move(datasets), weights, seq, vocab, seed, markers);
}

TrainingData open_training_data(const DatasetList& train, const DatasetList& val, int seq, int vocab,
                                uint64_t seed, int eval_every, int eval_sequences, DocumentMarkers markers) {
  TrainingData data{open_sequence_source(train, DataSplit::kTrain, seq, vocab, seed, markers),
                    open_sequence_source(val, DataSplit::kVal, seq, vocab, seed, markers)};
  if (eval_every > 0 && data.val->num_sequences() < eval_sequences)
    throw std::invalid_argument("train.eval_sequences = " + std::to_string(eval_sequences) + " but " +
                                paths_of(val) + " holds only " + std::to_string(data.val->num_sequences()) +
                                " sequences of model.seq + 1 tokens; lower train.eval_sequences");
  return data;
}

SequenceSource::SequenceSource(std::vector<Dataset> datasets, const std::vector<double>& weights, int seq,
                               int vocab, uint64_t seed, DocumentMarkers markers)
    : datasets_(std::move(datasets)), weights_(weights), blend_(weights), seq_(seq), markers_(markers) {
  for (size_t d = 0; d < datasets_.size(); ++d) {
    orders_.emplace_back(datasets_[d].num_sequences(), dataset_seed(seed, d));
    for (const std::unique_ptr<Shard>& shard : datasets_[d].shards()) {
      const uint32_t max_token = shard->max_token();
      if (max_token >= static_cast<uint32_t>(vocab))
        throw std::runtime_error("data: " + shard->path() + " contains token id " +
                                 std::to_string(max_token) + " but model.vocab = " + std::to_string(vocab) +
                                 "; set model.vocab to at least " + std::to_string(max_token + 1) +
                                 " or re-tokenize the data");
    }
  }
}

int64_t SequenceSource::num_sequences() const {
  int64_t total = 0;
  for (const Dataset& d : datasets_) total += d.num_sequences();
  return total;
}

const Shard* SequenceSource::shard_without_documents() const {
  if (markers_.any()) return nullptr;
  for (const Dataset& dataset : datasets_)
    for (const std::unique_ptr<Shard>& shard : dataset.shards())
      if (!shard->document_starts(0, 0)) return shard.get();
  return nullptr;
}

template <typename SequenceAt>
TokenBatch SequenceSource::gather(int64_t first, int64_t count, SequenceAt sequence_at) {
  at::Tensor windows = at::empty({count, seq_ + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* out = windows.data_ptr<int64_t>();
  std::vector<std::vector<int32_t>> starts;
  for (int64_t i = 0; i < count; ++i) {
    const BlendWalk::Draw draw = blend_.at(first + i);
    const auto d = static_cast<size_t>(draw.dataset);
    const Dataset::Location where = datasets_[d].locate(sequence_at(d, draw.index));
    int64_t* row = out + i * (seq_ + 1);
    where.shard->read(where.position, seq_ + 1, row);
    starts.push_back(document_starts(where, row));
  }
  return {windows.narrow(1, 0, seq_).contiguous(), windows.narrow(1, 1, seq_).contiguous(),
          std::move(starts)};
}

std::vector<int32_t> SequenceSource::document_starts(const Dataset::Location& where,
                                                     const int64_t* tokens) const {
  std::vector<int32_t> starts;
  if (const auto recorded = where.shard->document_starts(where.position + 1, seq_ - 1)) {
    for (int64_t s : *recorded) starts.push_back(static_cast<int32_t>(s - where.position));
  } else {
    for (int k = 1; k < seq_; ++k)
      if (markers_.starts_document(tokens[k - 1], tokens[k])) starts.push_back(k);
  }
  return starts;
}

TokenBatch SequenceSource::shuffled(int64_t first, int64_t count) {
  return gather(first, count, [&](size_t d, int64_t index) { return orders_[d].sample_at(index); });
}

TokenBatch SequenceSource::in_order(int64_t first, int64_t count) {
  return gather(first, count, [&](size_t d, int64_t index) { return index % datasets_[d].num_sequences(); });
}

}  // namespace atl::runtime
