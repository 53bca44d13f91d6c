// Tokens as both shard formats store them, read in place: little-endian unsigned 16- or 32-bit
// integers (Megatron's int32 reads as the same bits), possibly unaligned.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace atl::runtime {

// The formats are written in the host order of x86/ARM; reading them as-is needs the same order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are little-endian");

// A value of type T at byte `at`, which need not be aligned for T.
template <typename T>
T load_unaligned(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// `count` tokens of `bytes_per_token` (2 or 4) bytes at `body`, in the file `path` (for messages).
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const unsigned char* body, int bytes_per_token, int64_t count, std::string path)
      : body_(body), bytes_per_token_(bytes_per_token), count_(count), path_(std::move(path)) {}

  int64_t size() const { return count_; }
  // Token i; std::out_of_range outside [0, size()).
  uint32_t token(int64_t i) const;
  // Copies tokens [begin, begin + count) as int64; std::out_of_range when the range leaves the span.
  void read(int64_t begin, int64_t count, int64_t* out) const;
  uint32_t max_token() const;

 private:
  void check_range(int64_t begin, int64_t count) const;
  // Calls fn(i, token) for tokens [begin, begin + count), choosing the width once, not per token.
  template <typename Fn>
  void for_each(int64_t begin, int64_t count, Fn fn) const;

  const unsigned char* body_ = nullptr;
  int bytes_per_token_ = 2;
  int64_t count_ = 0;
  std::string path_;
};

}  // namespace atl::runtime
