// Byte-pair encoding by ranks, as tiktoken merges (its _byte_pair_merge): a piece starts as its
// bytes and the adjacent pair whose concatenation has the lowest rank is merged (the leftmost on a
// tie) until no concatenation is a token; a piece that is itself a token is that token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace atl::runtime {

class BytePairEncoding {
 public:
  static constexpr uint32_t kNoRank = UINT32_MAX;

  // tokens[rank]: the bytes of the token of that rank; all 256 single bytes among them.
  explicit BytePairEncoding(std::vector<std::string> tokens);

  uint32_t rank(std::string_view bytes) const;  // kNoRank if not a token
  const std::string& token(uint32_t rank) const { return tokens_[rank]; }
  size_t size() const { return tokens_.size(); }
  // Appends the ranks of non-empty `piece` to `out`.
  void encode(std::string_view piece, std::vector<uint32_t>& out) const;

 private:
  void merge_short(std::string_view piece, std::vector<uint32_t>& out) const;
  void merge_long(std::string_view piece, std::vector<uint32_t>& out) const;

  std::vector<std::string> tokens_;
  std::vector<uint32_t> slots_;  // open addressing: rank or kNoRank, by hash of the token's bytes
  uint64_t slot_mask_ = 0;
};

}  // namespace atl::runtime
