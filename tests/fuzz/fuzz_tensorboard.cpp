// TensorBoard event files (TFRecord framing: length, masked CRCs, Event protobufs), as the
// interoperability tests and tooling read them back.
#include "runtime/metrics/tensorboard.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  scratch.hold("events.out.tfevents.0.host", data, size);
  atl::fuzz::expect_clean(
      [&] {
        for (const std::string& file : atl::runtime::tensorboard_files(scratch.path().string()))
          atl::runtime::read_tensorboard_scalars(file);
      },
      {atl::fuzz::Rejection::kRuntimeError});
  return 0;
}
