// llm.c token shards (training and validation data): the 1024-byte header and the token body.
#include <algorithm>
#include <vector>

#include "runtime/data/token_shard.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const atl::fuzz::ScratchDir scratch;
  const std::string path = scratch.hold("train_000000.bin", data, size);
  atl::fuzz::expect_clean(
      [&] {
        const atl::runtime::TokenShard shard(path);
        shard.max_token();
        // The first and last tokens, as a batch reads them.
        const int64_t count = std::min<int64_t>(shard.size(), 64);
        std::vector<int64_t> tokens(static_cast<size_t>(count));
        shard.read(0, count, tokens.data());
        shard.read(shard.size() - count, count, tokens.data());
        shard.token(shard.size() - 1);
      },
      {atl::fuzz::Rejection::kRuntimeError});
  return 0;
}
