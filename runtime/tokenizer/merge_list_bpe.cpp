#include "runtime/tokenizer/merge_list_bpe.h"

#include <queue>
#include <stdexcept>

namespace atl::runtime {

MergeListBpe::MergeListBpe(const std::unordered_map<std::string, uint32_t>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges)
    : ignore_merges_(ignore_merges) {
  token_bytes_.reserve(vocab.size());
  for (const auto& [bytes, id] : vocab) token_bytes_.push_back(bytes);
  vocab_.reserve(vocab.size());
  for (const std::string& bytes : token_bytes_) vocab_.emplace(bytes, vocab.at(bytes));
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = vocab_.find(std::string_view(std::string(1, static_cast<char>(byte))));
    if (it == vocab_.end())
      throw std::invalid_argument("the vocab has no token for byte " + std::to_string(byte));
    byte_ids_[byte] = it->second;
  }
  merges_.reserve(merges.size());
  for (uint32_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = vocab_.find(left), r = vocab_.find(right), joined = vocab_.find(left + right);
    if (l == vocab_.end() || r == vocab_.end() || joined == vocab_.end())
      throw std::invalid_argument("merge " + std::to_string(rank) +
                                  " joins tokens that are not in the vocab");
    merges_[uint64_t{l->second} << 32 | r->second] =
        Merge{rank, joined->second};  // a repeated pair: the last counts, as in tokenizers
  }
}

const MergeListBpe::Merge* MergeListBpe::merge_of(uint32_t left, uint32_t right) const {
  const auto it = merges_.find(uint64_t{left} << 32 | right);
  return it == merges_.end() ? nullptr : &it->second;
}

void MergeListBpe::encode(std::string_view word, std::vector<uint32_t>& out) const {
  if (ignore_merges_)
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  struct Symbol {
    uint32_t id;
    size_t prev;  // SIZE_MAX: none
    size_t next;  // word.size(): none
    bool merged_away;
  };
  struct Candidate {
    uint32_t rank;
    size_t pos;
    uint32_t joined;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const size_t n = word.size();
  std::vector<Symbol> symbols(n);
  for (size_t i = 0; i < n; ++i)
    symbols[i] = {byte_ids_[static_cast<unsigned char>(word[i])], i == 0 ? SIZE_MAX : i - 1, i + 1, false};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (size_t i = 0; i + 1 < n; ++i)
    if (const Merge* m = merge_of(symbols[i].id, symbols[i + 1].id)) queue.push({m->rank, i, m->joined});
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.merged_away || left.next >= n) continue;
    const Symbol right = symbols[left.next];
    const Merge* still = merge_of(left.id, right.id);
    if (still == nullptr || still->joined != top.joined) continue;  // the pair changed since
    symbols[left.next].merged_away = true;
    left.id = top.joined;
    left.next = right.next;
    if (right.next < n) symbols[right.next].prev = top.pos;
    if (left.prev != SIZE_MAX)
      if (const Merge* m = merge_of(symbols[left.prev].id, left.id))
        queue.push({m->rank, left.prev, m->joined});
    if (left.next < n)
      if (const Merge* m = merge_of(left.id, symbols[left.next].id))
        queue.push({m->rank, top.pos, m->joined});
  }
  for (size_t i = 0; i < n; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace atl::runtime
