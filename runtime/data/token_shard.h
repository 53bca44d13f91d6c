// Token shards in llm.c's format (DESIGN §8), memory-mapped read-only.
//
// Header: 256 int32 -- [0] magic, [1] version, [2] token count. magic 20240520 with version 1
// holds uint16 tokens; magic 20240801 with version 7 holds uint32 tokens. Tokens follow the
// 1024-byte header, little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/shard.h"

namespace atl::runtime {

class TokenShard final : public Shard {
 public:
  // Opens and validates; throws std::runtime_error with one line naming the file, the problem and
  // the fix (missing file, short header, unknown magic or version, no tokens, truncated body).
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;

  int64_t size() const override { return tokens_; }
  int bytes_per_token() const { return bytes_per_token_; }
  const std::string& path() const override { return path_; }

  // Token i; std::out_of_range outside [0, size()).
  uint32_t token(int64_t i) const;
  void read(int64_t begin, int64_t count, int64_t* out) const override;
  uint32_t max_token() const override;

 private:
  void check_range(int64_t begin, int64_t count) const;
  void unmap();

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* body_ = nullptr;
  int64_t tokens_ = 0;
  int bytes_per_token_ = 2;
};

// Writes a shard: uint16 when every token fits (unless force_uint32), uint32 otherwise. Written to
// a temporary file and renamed, so a crash never leaves a half-written shard under `path`.
// std::invalid_argument for no tokens (the reader would reject the shard) or more than 2^31-1 (llm.c's
// header counts tokens in an int32: a larger corpus is many shards, which a dataset reads as one).
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       bool force_uint32 = false);

}  // namespace atl::runtime
