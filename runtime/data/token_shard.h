// Token shards in llm.c's format (DESIGN §8), memory-mapped read-only.
//
// Header: 256 int32 -- [0] magic, [1] version, [2] token count. magic 20240520 with version 1
// holds uint16 tokens; magic 20240801 with version 7 holds uint32 tokens. Tokens follow the
// 1024-byte header, little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/mapped_file.h"
#include "runtime/data/shard.h"
#include "runtime/data/token_span.h"

namespace atl::runtime {

class TokenShard final : public Shard {
 public:
  // Opens and validates; throws std::runtime_error with one line naming the file, the problem and
  // the fix (missing file, short header, unknown magic or version, no tokens, truncated body).
  explicit TokenShard(const std::string& path);

  int64_t size() const override { return tokens_.size(); }
  int bytes_per_token() const { return bytes_per_token_; }
  const std::string& path() const override { return path_; }

  // Token i; std::out_of_range outside [0, size()).
  uint32_t token(int64_t i) const { return tokens_.token(i); }
  void read(int64_t begin, int64_t count, int64_t* out) const override { tokens_.read(begin, count, out); }
  uint32_t max_token() const override { return tokens_.max_token(); }

 private:
  std::string path_;
  MappedFile file_;
  int bytes_per_token_ = 2;
  TokenSpan tokens_;
};

// Writes a shard: uint16 when every token fits (unless force_uint32), uint32 otherwise. Written to
// a temporary file and renamed, so a crash never leaves a half-written shard under `path`.
// std::invalid_argument for no tokens (the reader would reject the shard) or more than 2^31-1 (llm.c's
// header counts tokens in an int32: a larger corpus is many shards, which a dataset reads as one).
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       bool force_uint32 = false);

}  // namespace atl::runtime
