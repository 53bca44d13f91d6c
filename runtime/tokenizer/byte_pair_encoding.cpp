#include "runtime/tokenizer/byte_pair_encoding.h"

#include <cstring>
#include <queue>
#include <stdexcept>

namespace atl::runtime {
namespace {

uint64_t mix(uint64_t h) {
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  return h;
}

uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = mix(h ^ word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return mix(h ^ tail);
}

// tiktoken merges short pieces by rescanning a vector and long ones with a heap; both orders are
// (rank, start), so they agree; the vector is faster below this length.
constexpr size_t kLongPiece = 100;

}  // namespace

BytePairEncoding::BytePairEncoding(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  size_t capacity = 1;
  while (capacity < 2 * tokens_.size()) capacity <<= 1;
  slots_.assign(capacity, kNoRank);
  slot_mask_ = capacity - 1;
  for (uint32_t r = 0; r < tokens_.size(); ++r) {
    uint64_t slot = hash_bytes(tokens_[r]) & slot_mask_;
    while (slots_[slot] != kNoRank) {
      if (tokens_[slots_[slot]] == tokens_[r])
        throw std::invalid_argument("token of rank " + std::to_string(r) + " repeats rank " +
                                    std::to_string(slots_[slot]));
      slot = (slot + 1) & slot_mask_;
    }
    slots_[slot] = r;
  }
  for (int byte = 0; byte < 256; ++byte)
    if (rank(std::string(1, static_cast<char>(byte))) == kNoRank)
      throw std::invalid_argument("byte " + std::to_string(byte) + " has no rank");
}

uint32_t BytePairEncoding::rank(std::string_view bytes) const {
  for (uint64_t slot = hash_bytes(bytes) & slot_mask_;; slot = (slot + 1) & slot_mask_) {
    const uint32_t r = slots_[slot];
    if (r == kNoRank || tokens_[r] == bytes) return r;
  }
}

void BytePairEncoding::encode(std::string_view piece, std::vector<uint32_t>& out) const {
  if (const uint32_t whole = rank(piece); whole != kNoRank) {
    out.push_back(whole);
  } else if (piece.size() < kLongPiece) {
    merge_short(piece, out);
  } else {
    merge_long(piece, out);
  }
}

void BytePairEncoding::merge_short(std::string_view piece, std::vector<uint32_t>& out) const {
  // parts[i]: where part i starts and the rank of part i joined with part i + 1.
  struct Part {
    uint32_t start;
    uint32_t rank;
  };
  Part parts[kLongPiece + 1];
  size_t count = piece.size() + 1;
  for (size_t i = 0; i + 1 < piece.size(); ++i)
    parts[i] = {static_cast<uint32_t>(i), rank(piece.substr(i, 2))};
  parts[piece.size() - 1] = {static_cast<uint32_t>(piece.size() - 1), kNoRank};
  parts[piece.size()] = {static_cast<uint32_t>(piece.size()), kNoRank};
  // The rank of parts i and i + 1 joined once i + 1 absorbed i + 2.
  const auto joined_rank = [&](size_t i) {
    return i + 3 < count ? rank(piece.substr(parts[i].start, parts[i + 3].start - parts[i].start)) : kNoRank;
  };
  for (;;) {
    size_t best = 0;
    uint32_t best_rank = kNoRank;
    for (size_t i = 0; i + 1 < count; ++i)
      if (parts[i].rank < best_rank) best_rank = parts[i].rank, best = i;
    if (best_rank == kNoRank) break;
    if (best > 0) parts[best - 1].rank = joined_rank(best - 1);
    parts[best].rank = joined_rank(best);
    std::memmove(&parts[best + 1], &parts[best + 2], (count - best - 2) * sizeof(Part));
    --count;
  }
  for (size_t i = 0; i + 1 < count; ++i)
    out.push_back(rank(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
}

void BytePairEncoding::merge_long(std::string_view piece, std::vector<uint32_t>& out) const {
  // Parts as a linked list over byte offsets, candidate merges in a heap; a merge whose pair has
  // changed since it was pushed is stale and skipped.
  struct Part {
    size_t prev;
    size_t end;       // this part is piece[start, end)
    size_t next_end;  // the part after it ends here
    uint32_t next_rank;
  };
  struct Merge {
    uint32_t rank;
    size_t start;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : start > o.start; }
  };
  const size_t n = piece.size();
  std::vector<Part> parts(n);
  std::priority_queue<Merge, std::vector<Merge>, std::greater<>> heap;
  for (size_t i = 0; i < n; ++i) {
    parts[i] = {i == 0 ? SIZE_MAX : i - 1, i + 1, i + 2, kNoRank};
    if (i + 1 < n) {
      parts[i].next_rank = rank(piece.substr(i, 2));
      if (parts[i].next_rank != kNoRank) heap.push({parts[i].next_rank, i});
    }
  }
  const auto candidate = [&](size_t start, size_t next_end) {
    parts[start].next_end = next_end;
    parts[start].next_rank = next_end <= n ? rank(piece.substr(start, next_end - start)) : kNoRank;
    if (parts[start].next_rank != kNoRank) heap.push({parts[start].next_rank, start});
  };
  while (!heap.empty()) {
    const Merge merge = heap.top();
    heap.pop();
    if (merge.rank != parts[merge.start].next_rank) continue;
    const size_t left = merge.start;
    const size_t right = parts[left].end;
    const size_t right_end = parts[left].next_end;
    parts[left].end = right_end;
    candidate(left, parts[right].next_end);
    if (right_end < n) parts[right_end].prev = left;
    if (left > 0) candidate(parts[left].prev, right_end);
    parts[right].next_rank = kNoRank;
  }
  for (size_t i = 0; i < n; i = parts[i].end) out.push_back(rank(piece.substr(i, parts[i].end - i)));
}

}  // namespace atl::runtime
