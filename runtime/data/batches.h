// Batches of training and validation sequences cut from datasets of token shards, blended by weight.
//
// A sequence is a window of seq + 1 tokens (inputs, and targets shifted by one). Position p of the
// stream draws from the dataset BlendWalk picks, and that dataset's own stream position from it;
// training shuffles each dataset's stream by its SampleOrder, which depends only on (seed, dataset,
// epoch), so every data-parallel layout sees the same stream and a global position is a complete
// cursor. Validation takes each dataset's sequences in file order, blended the same way.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/blend.h"
#include "runtime/data/dataset.h"
#include "runtime/data/dataset_source.h"
#include "runtime/data/sample_order.h"

namespace atl::runtime {

struct TokenBatch {
  at::Tensor inputs;   // int64 [count, seq]
  at::Tensor targets;  // int64 [count, seq]
  // Per sequence, the offsets in [1, seq) of its inputs where a document starts, ascending: what
  // document-masked attention needs (position j attends to i <= j only when no start lies in
  // (i, j]). From the shard's own record (Megatron's document index), else from the tokenizer's
  // markers in the tokens (DocumentMarkers); empty when neither tells.
  std::vector<std::vector<int32_t>> document_starts;
};

// The tokens that mark documents in a stream: a document starts at each `bos`, or after each `eos`
// (bos wins when both are set); -1 for none (the byte tokenizer marks none).
struct DocumentMarkers {
  int bos = -1;
  int eos = -1;
  // Whether the token after `previous` starts a document: it is the bos, else `previous` is the eos
  // (the first token of a sequence is asked by no one).
  bool starts_document(int64_t previous, int64_t token) const {
    return bos >= 0 ? token == bos : eos >= 0 && previous == eos;
  }
  bool any() const { return bos >= 0 || eos >= 0; }
};

class SequenceSource {
 public:
  // `weights`: one per dataset, each > 0. Throws std::runtime_error (one line naming the file and
  // the fix) when a shard holds a token >= vocab.
  SequenceSource(std::vector<Dataset> datasets, const std::vector<double>& weights, int seq, int vocab,
                 uint64_t seed, DocumentMarkers markers = {});

  // Every dataset's sequences together.
  int64_t num_sequences() const;
  // The first shard that tells nothing of where its documents start (no recorded documents and no
  // DocumentMarkers to find them by); null when every shard tells.
  const Shard* shard_without_documents() const;
  const std::vector<Dataset>& datasets() const { return datasets_; }
  // Each dataset's share of the stream (the weights normalised to sum to 1).
  const std::vector<double>& shares() const { return blend_.weights(); }
  // What `sequences_in_run` sequences of this stream draw from each dataset.
  std::vector<DatasetUse> uses(int64_t sequences_in_run) const {
    return dataset_uses(datasets_, weights_, sequences_in_run);
  }
  // Sequences at global stream positions [first, first + count), shuffled.
  TokenBatch shuffled(int64_t first, int64_t count);
  // Sequences at stream positions [first, first + count), each dataset in file order (from its
  // start again once it is read through).
  TokenBatch in_order(int64_t first, int64_t count);

 private:
  template <typename SequenceAt>
  TokenBatch gather(int64_t first, int64_t count, SequenceAt sequence_at);
  // The document starts of the sequence at `where`, whose seq + 1 tokens are `tokens`.
  std::vector<int32_t> document_starts(const Dataset::Location& where, const int64_t* tokens) const;

  std::vector<Dataset> datasets_;
  std::vector<double> weights_;
  std::vector<SampleOrder> orders_;
  BlendWalk blend_;
  int seq_;
  DocumentMarkers markers_;
};

// The datasets of `sources` (their `split` side where a path is a prepared directory) as one
// stream of sequences of `seq` + 1 tokens below `vocab`; throws std::runtime_error for a dataset
// that does not open.
std::unique_ptr<SequenceSource> open_sequence_source(const DatasetList& sources, DataSplit split, int seq,
                                                     int vocab, uint64_t seed, DocumentMarkers markers = {});

// The sequences a run reads: training shuffled per step, validation in file order.
struct TrainingData {
  std::unique_ptr<SequenceSource> train, val;
};

// Opens the datasets of `train` and `val` as sequences of `seq` + 1 tokens below `vocab`. Throws
// std::runtime_error for a dataset that does not open, std::invalid_argument when validation is on
// (`eval_sequences` > 0 every `eval_every` > 0 steps) and the validation data holds fewer sequences.
TrainingData open_training_data(const DatasetList& train, const DatasetList& val, int seq, int vocab,
                                uint64_t seed, int eval_every, int eval_sequences,
                                DocumentMarkers markers = {});

}  // namespace atl::runtime
