// Generation with the KV cache (runtime/inference/cached_decoder.h) against the baseline it
// replaces, measured in the same run on one thread: the training forward recomputed over the whole
// prefix for every new token (LocalModel, what generation without a cache costs). Greedy, so both
// produce the same tokens (checked). Prints tokens per second of each and the ratio.
//   build/bin/bench_sampling [MODEL=runs/pydocs-dp4/checkpoints] [TOKENS=200]
// MODEL: a checkpoint or Hugging Face directory (default: the main job's).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/inference/local_model.h"
#include "runtime/inference/sampling.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "runs/pydocs-dp4/checkpoints";
  const int tokens = argc > 2 ? std::atoi(argv[2]) : 200;
  at::set_num_threads(1);
  const atl::runtime::TrainedModel trained = atl::runtime::load_trained_model(path);
  const std::vector<uint32_t> encoded =
      atl::runtime::encode_prompt(*trained.tokenizer, "The built-in function ");
  const std::vector<int64_t> prompt(encoded.begin(), encoded.end());
  const int budget = std::min<int>(tokens, trained.config.seq - static_cast<int>(prompt.size()));

  atl::runtime::CachedDecoder decoder(trained);
  atl::runtime::SamplingOptions greedy;
  greedy.temperature = 0;
  greedy.max_tokens = budget;
  auto t0 = Clock::now();
  const std::vector<int64_t> cached = atl::runtime::generate(decoder, prompt, greedy);
  const double cached_s = seconds_since(t0);

  const atl::runtime::LocalModel local(trained);
  std::vector<int64_t> sequence = prompt, recomputed;
  t0 = Clock::now();
  for (int i = 0; i < budget; ++i) {
    const at::Tensor ids = at::tensor(sequence, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
    const int64_t next = local.logits(ids)[0][-1].argmax().item<int64_t>();
    recomputed.push_back(next);
    sequence.push_back(next);
  }
  const double full_s = seconds_since(t0);

  std::printf("bench_sampling: %s, %d tokens after a %zu-token prompt, greedy, 1 thread\n",
              trained.source.c_str(), budget, prompt.size());
  std::printf("  KV cache (CachedDecoder)          %8.1f tokens/s\n", budget / cached_s);
  std::printf("  full forward per token (baseline) %8.1f tokens/s\n", budget / full_s);
  std::printf("  ratio cache / baseline            %8.2fx   same tokens: %s\n", full_s / cached_s,
              cached == recomputed ? "yes" : "NO");
  return cached == recomputed ? 0 : 1;
}
