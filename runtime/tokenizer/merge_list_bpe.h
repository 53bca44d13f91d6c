// Byte-pair encoding by a list of merges, as Hugging Face's BPE model applies it (tokenizers'
// Word::merge_all): a word starts as the tokens of its bytes, and the adjacent pair whose merge comes
// first in the list is merged (the leftmost on a tie) until no adjacent pair has a merge. With
// ignore_merges, a word that is itself a token is that token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace atl::runtime {

class MergeListBpe {
 public:
  // vocab: token bytes -> id, the 256 single bytes among them; merges: (left, right) token bytes in
  // priority order, each joining into a token of vocab. std::invalid_argument otherwise.
  MergeListBpe(const std::unordered_map<std::string, uint32_t>& vocab,
               const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  // Appends the ids of non-empty `word` to `out`.
  void encode(std::string_view word, std::vector<uint32_t>& out) const;

 private:
  struct Merge {
    uint32_t rank;
    uint32_t joined;
  };
  const Merge* merge_of(uint32_t left, uint32_t right) const;

  std::unordered_map<std::string_view, uint32_t> vocab_;  // views into token_bytes_
  std::vector<std::string> token_bytes_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id)
  uint32_t byte_ids_[256] = {};
  bool ignore_merges_;
};

}  // namespace atl::runtime
