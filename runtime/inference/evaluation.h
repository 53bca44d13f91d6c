// `atoll eval`: a model's loss on a token shard -- mean next-token cross-entropy over the shard's
// sequences in file order (as validation in training), perplexity, and bits per byte: the loss
// summed in bits over the bytes of text the target tokens stand for, which compares models whatever
// their tokenizer (a byte-level model's bits per byte is its loss / ln 2).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "runtime/inference/local_model.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

struct EvalResult {
  double loss = 0.0;  // nats per token
  double perplexity = 0.0;
  double bits_per_byte = 0.0;
  int64_t sequences = 0, tokens = 0, bytes = 0;
};

// Sequences of model.seq + 1 tokens from `shard` (all of them, or the first max_sequences > 0), in
// batches of `batch`; a directory or glob reads as data.val does (a prepared directory's val*.bin).
// std::runtime_error (one line) for a shard that does not open, holds ids past the vocabulary, or is shorter
// than one sequence; std::invalid_argument (one line) when the model masks documents
// (model.document_mask, which eval applies as training did) and neither the shard nor the
// tokenizer's BOS/EOS tell where they start. `progress`: sequences done, in all.
EvalResult evaluate(const LocalModel& model, const Tokenizer& tokenizer, const std::string& shard,
                    int64_t max_sequences = 0, int batch = 8,
                    const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace atl::runtime
