// Text generation from a CachedDecoder: greedy (temperature 0) or sampled with a temperature and
// top-k, from a seeded generator so the same seed gives the same text.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/inference/cached_decoder.h"

namespace atl::runtime {

struct SamplingOptions {
  int max_tokens = 128;
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
  int stop_token = -1;  // generation ends after this token (the tokenizer's eos); -1: none
};

// Feeds `prompt` (at least one token) and generates up to options.max_tokens tokens, or fewer where
// model.seq ends; `on_token` is called with each new token as it is chosen. Returns the new tokens.
// std::invalid_argument for an empty prompt or one longer than model.seq.
std::vector<int64_t> generate(CachedDecoder& decoder, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options,
                              const std::function<void(int64_t)>& on_token = nullptr);

}  // namespace atl::runtime
