// Tokenizer models as Atoll reads them (SentencePiece, tiktoken rank files, tokenizer.json):
// data.tokenizer files and the serialized model a checkpoint's manifest carries
// (tokenizer_from_serialized is the one reader of both). A model that loads must then encode,
// decode and measure text, or fail with encode's and decode's own error.
#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string serialized(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<atl::runtime::Tokenizer> tokenizer;
  atl::fuzz::expect_clean([&] { tokenizer = atl::runtime::tokenizer_from_serialized(serialized); },
                          {atl::fuzz::Rejection::kInvalidArgument});
  if (!tokenizer) return 0;
  // A model can load and still fail on some text (a damaged normalizer): encode and decode then say so
  // with their documented std::runtime_error.
  atl::fuzz::expect_clean(
      [&] {
        const std::vector<uint32_t> ids =
            tokenizer->encode("The quick brown fox, 1984 caf\xc3\xa9 \xe2\x82\xac\n");
        tokenizer->decode(ids);
        for (uint32_t id : ids) tokenizer->byte_length(id);
        // Ids the model does not have decode to nothing.
        tokenizer->decode({0, 1, 2, static_cast<uint32_t>(tokenizer->vocab_size()), 0xffffffffu});
      },
      {atl::fuzz::Rejection::kRuntimeError});
  return 0;
}
