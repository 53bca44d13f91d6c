#include "runtime/inference/sampling.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <limits>
#include <stdexcept>

namespace atl::runtime {
namespace {

int64_t choose(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator) {
  if (options.temperature <= 0.0) return logits.argmax().item<int64_t>();
  at::Tensor scaled = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < scaled.size(0)) {
    const double kth = std::get<0>(at::topk(scaled, options.top_k)).min().item<double>();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<double>::infinity());
  }
  return at::multinomial(at::softmax(scaled, 0), 1, /*replacement=*/false, generator).item<int64_t>();
}

}  // namespace

std::vector<int64_t> generate(CachedDecoder& decoder, const std::vector<int64_t>& prompt,
                              const SamplingOptions& options, const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty; pass some text with --prompt");
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  decoder.reset();
  at::Tensor logits = decoder.feed(prompt);
  std::vector<int64_t> generated;
  while (static_cast<int>(generated.size()) < options.max_tokens) {
    const int64_t token = choose(logits, options, generator);
    generated.push_back(token);
    if (on_token) on_token(token);
    if (token == options.stop_token || decoder.position() >= decoder.capacity()) break;
    logits = decoder.feed({token});
  }
  return generated;
}

}  // namespace atl::runtime
