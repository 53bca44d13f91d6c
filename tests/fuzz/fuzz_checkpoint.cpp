// A whole checkpoint directory as Atoll opens it: LATEST, step-N/manifest.pb (with the model
// description and tokenizer it carries), the shard headers it records and every chunk's data and
// checksum -- once as `atoll eval`, `sample` and `ckpt export` load it (consolidated), once as a
// resume does (each tensor's pieces filled from the chunks that intersect them). The input is a set
// of files (fuzz_input.h's split_files), e.g. LATEST, step-2/manifest.pb, step-2/rank-00000.safetensors.
#include <ATen/ATen.h>

#include <vector>

#include "checkpoint/checkpoint_store.h"
#include "runtime/inference/trained_model.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Resume's reader: every tensor of the manifest of rank 1 or 2 (what a model's parameters are), read
// whole as one rank would, if it is small enough that asking for it is no allocation test.
void load_as_resume(const std::string& dir) {
  namespace ckpt = atl::checkpoint;
  const std::string step = atl::runtime::checkpoint_in(dir);
  const ckpt::proto::Manifest manifest = ckpt::read_manifest(step);
  std::vector<ckpt::Piece> pieces;
  for (const ckpt::proto::Tensor& t : manifest.tensors()) {
    const std::vector<int64_t> shape(t.global_shape().begin(), t.global_shape().end());
    if (shape.empty() || shape.size() > 2) continue;
    const ckpt::Box whole{std::vector<int64_t>(shape.size(), 0), shape};
    if (whole.numel() > (int64_t{1} << 20)) continue;
    pieces.push_back({t.name(), t.role(), static_cast<int>(t.island()), shape, whole, 0, whole.numel(),
                      at::empty({whole.numel()}, at::kFloat)});
  }
  ckpt::load_pieces(step, manifest, pieces);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string dir = scratch.hold_files(data, size);
  const auto documented = atl::fuzz::any_documented_rejection();
  atl::fuzz::expect_clean([&] { atl::runtime::load_trained_model(dir); }, documented);
  atl::fuzz::expect_clean([&] { load_as_resume(dir); }, documented);
  return 0;
}
