// Test tool for tests/interop/transformers_check.py: the logits Atoll computes for a model (a
// checkpoint of any layout or a Hugging Face directory) on given token ids, by the training model's
// forward (LocalModel) and position by position through the KV cache (CachedDecoder), written as
// safetensors so Python compares them with transformers' own.
// usage: atoll_logits MODEL OUT.safetensors ID...
#include <ATen/ATen.h>

#include <iostream>

#include "checkpoint/safetensors.h"
#include "runtime/inference/cached_decoder.h"
#include "runtime/inference/local_model.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: atoll_logits MODEL OUT.safetensors ID...\n";
    return 2;
  }
  std::vector<int64_t> ids;
  for (int i = 3; i < argc; ++i) ids.push_back(std::stoll(argv[i]));
  const atl::runtime::TrainedModel trained = atl::runtime::load_trained_model(argv[1]);
  const at::Tensor tokens = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  const at::Tensor forward = atl::runtime::LocalModel(trained).logits(tokens).squeeze(0).contiguous();
  atl::runtime::CachedDecoder decoder(trained);
  std::vector<at::Tensor> cached;
  for (int64_t id : ids) cached.push_back(decoder.feed({id}));
  atl::checkpoint::write_safetensors(argv[2],
                                     {{"forward", forward}, {"cached", at::stack(cached).contiguous()}});
  return 0;
}
