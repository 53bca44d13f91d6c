// Autoregressive decoding with a KV cache: each decoder layer keeps the keys and values of the
// positions seen so far, so a new token costs one position's work instead of the whole prefix's.
// Built from a TrainedModel's canonical weights (one process, fp32); its logits equal the training
// model's forward at every position (tests/unit/test_inference.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "runtime/data/batches.h"
#include "runtime/inference/trained_model.h"

namespace atl::runtime {

class CachedDecoder {
 public:
  // With model.document_mask, `markers` tell where a new document starts in the fed tokens (the
  // tokenizer's BOS/EOS, as the training data loader found them), and a position then sees only
  // the earlier positions of its own document, as in training; ignored without it.
  explicit CachedDecoder(const TrainedModel& trained, DocumentMarkers markers = {});

  // Appends `tokens` at the next positions (the whole prompt at once, then one token at a time) and
  // returns the logits that follow the last one: fp32 [vocab]. std::invalid_argument when the
  // sequence would pass model.seq (RoPE's table and the cache end there).
  at::Tensor feed(const std::vector<int64_t>& tokens);
  int64_t position() const { return position_; }
  int64_t capacity() const { return config_.seq; }  // positions the cache holds
  void reset() {
    position_ = 0;
    documents_.clear();
  }

 private:
  struct Layer {
    at::Tensor input_norm, wq, wk, wv, wo, post_norm, w_gate, w_up, w_down;
    at::Tensor keys, values;  // [1, kv_heads, model.seq, head_dim]
  };
  ModelConfig config_;
  int64_t head_dim_;
  std::vector<Layer> layers_;
  at::Tensor embed_, final_norm_, lm_head_, rope_cos_, rope_sin_;
  int64_t position_ = 0;
  // With model.document_mask: each fed position's document (0, 1, ... in order) and the last token
  // fed, which tells whether the next one starts a document after an EOS.
  DocumentMarkers markers_;
  std::vector<int64_t> documents_;
  int64_t last_token_ = -1;
};

}  // namespace atl::runtime
