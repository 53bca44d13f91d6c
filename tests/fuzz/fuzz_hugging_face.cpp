// model.init_from and `atoll eval/sample` on a Hugging Face Llama directory: config.json,
// model.safetensors or the shards model.safetensors.index.json lists, and tokenizer.model; and
// model.init_from naming a safetensors file, checked against the model of the seeds'
// (make_seeds.sh) config. The input is a set of files (fuzz_input.h's split_files).
#include <filesystem>

#include "runtime/inference/trained_model.h"
#include "runtime/model/llama.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

atl::runtime::ModelConfig seeds_model() {
  atl::runtime::ModelConfig m;
  m.vocab = 320;
  m.dim = 8;
  m.layers = 1;
  m.heads = 2;
  m.kv_heads = 2;
  m.ffn = 16;
  m.seq = 8;
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string dir = scratch.hold_files(data, size);
  const auto documented = atl::fuzz::any_documented_rejection();
  atl::fuzz::expect_clean([&] { atl::runtime::load_trained_model(dir); }, documented);
  const std::string file = dir + "/model.safetensors";
  if (std::filesystem::exists(file))
    atl::fuzz::expect_clean([&] { atl::runtime::read_initial_weights(seeds_model(), file); }, documented);
  return 0;
}
