#include "runtime/inference/evaluation.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "parallel/document_mask.h"
#include "runtime/data/batches.h"

namespace atl::runtime {

EvalResult evaluate(const LocalModel& model, const Tokenizer& tokenizer, const std::string& shard,
                    int64_t max_sequences, int batch, const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& config = model.config();
  // With model.document_mask, the documents as training found them: the shard's record, else the
  // tokenizer's BOS/EOS.
  const DocumentMarkers markers =
      config.document_mask ? DocumentMarkers{tokenizer.bos_id(), tokenizer.eos_id()} : DocumentMarkers{};
  const std::unique_ptr<SequenceSource> source = open_sequence_source(
      one_dataset(shard), DataSplit::kVal, config.seq, config.vocab, /*seed=*/0, markers);
  if (config.document_mask)
    if (const Shard* unknown = source->shard_without_documents())
      throw std::invalid_argument("the model masks documents (document_mask=true) but " + unknown->path() +
                                  " records no document starts and the tokenizer (" +
                                  tokenizer.description() +
                                  ") has no BOS or EOS to find them by; evaluate on a Megatron .bin/.idx or "
                                  "data prepared with a tokenizer that marks documents");
  const int64_t sequences =
      max_sequences > 0 ? std::min(max_sequences, source->num_sequences()) : source->num_sequences();
  EvalResult result;
  double nats = 0.0;
  for (int64_t first = 0; first < sequences; first += batch) {
    const int64_t count = std::min<int64_t>(batch, sequences - first);
    const TokenBatch b = source->in_order(first, count);
    const at::Tensor documents =
        config.document_mask ? parallel::document_ids(b.document_starts, config.seq) : at::Tensor();
    nats +=
        model.loss(b.inputs, b.targets, documents).item<double>() * static_cast<double>(b.targets.numel());
    const at::Tensor targets = b.targets.contiguous();
    const int64_t* ids = targets.data_ptr<int64_t>();
    for (int64_t i = 0; i < targets.numel(); ++i)
      result.bytes += tokenizer.byte_length(static_cast<uint32_t>(ids[i]));
    result.tokens += targets.numel();
    if (progress) progress(first + count, sequences);
  }
  result.sequences = sequences;
  result.loss = nats / static_cast<double>(result.tokens);
  result.perplexity = std::exp(result.loss);
  result.bits_per_byte = result.bytes > 0 ? nats / std::log(2.0) / static_cast<double>(result.bytes) : 0.0;
  return result;
}

}  // namespace atl::runtime
