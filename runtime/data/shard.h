// A file of tokens the loader reads in place (memory-mapped): llm.c's shards (token_shard.h) or
// Megatron's .bin beside its .idx (megatron_shard.h). Token positions are 64-bit throughout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace atl::runtime {

class Shard {
 public:
  virtual ~Shard() = default;

  virtual const std::string& path() const = 0;
  virtual int64_t size() const = 0;  // tokens
  // Copies tokens [begin, begin + count) as int64 (what embedding lookups take); std::out_of_range
  // when the range leaves the shard.
  virtual void read(int64_t begin, int64_t count, int64_t* out) const = 0;
  // The largest token id in the shard (one pass; checked against model.vocab at start-up).
  virtual uint32_t max_token() const = 0;
  // The positions in [begin, begin + count) where a document starts, ascending, when the file
  // records its documents (Megatron's document index); std::nullopt when only the tokens tell.
  virtual std::optional<std::vector<int64_t>> document_starts(int64_t /*begin*/, int64_t /*count*/) const {
    return std::nullopt;
  }
};

// Throws std::runtime_error("data: PATH PROBLEM"): how the shard readers report a bad file.
[[noreturn]] void shard_error(const std::string& path, const std::string& problem);

// Opens `path` as the format its files say; throws std::runtime_error with one line naming the file,
// the problem and the fix.
std::unique_ptr<Shard> open_shard(const std::string& path);

}  // namespace atl::runtime
