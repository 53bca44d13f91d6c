// The safetensors reader (model.init_from files, exports): header length, JSON header, tensor data.
// A file it accepts must also survive a write and a second read bit for bit.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>

#include "checkpoint/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void check_round_trip(const atl::fuzz::ScratchDir& scratch,
                      const std::vector<atl::checkpoint::NamedTensor>& read) {
  const std::string copy = (scratch.path() / "copy.safetensors").string();
  atl::checkpoint::write_safetensors(copy, read);
  const auto again = atl::checkpoint::read_safetensors(copy);
  bool same = again.size() == read.size();
  for (size_t i = 0; same && i < read.size(); ++i)
    same = again[i].name == read[i].name && again[i].tensor.scalar_type() == read[i].tensor.scalar_type() &&
           again[i].tensor.sizes() == read[i].tensor.sizes() &&
           std::memcmp(again[i].tensor.data_ptr(), read[i].tensor.data_ptr(), read[i].tensor.nbytes()) == 0;
  if (!same) {
    std::fprintf(stderr, "fuzz: a safetensors file read back differently after a write\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string path = scratch.hold("model.safetensors", data, size);
  atl::fuzz::expect_clean(
      [&] {
        const auto tensors = atl::checkpoint::read_safetensors(path);
        check_round_trip(scratch, tensors);
      },
      {atl::fuzz::Rejection::kRuntimeError});
  return 0;
}
