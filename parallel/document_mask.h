// Document masks: in a sequence packed from several documents, a query sees only the earlier keys of
// its own document (causal AND same document).
//
// Documents are given as every position's document index in the whole sequence (segment ids): 0 up
// to the first document start, one more at each start. The ids are always those of the whole
// sequence, never of a context-parallel rank's chunks: a chunk's documents are cut from them by the
// chunk's global index, so a boundary means the same on every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace atl::parallel {

// Every position's document: int64 [rows, seq]. `starts`: per row, the offsets in [1, seq) where a
// document starts, ascending (TokenBatch::document_starts). Throws std::invalid_argument naming the
// row and offset when an offset lies outside [1, seq) or the offsets do not ascend.
at::Tensor document_ids(const std::vector<std::vector<int32_t>>& starts, int64_t seq);

// Bool [rows, 1, queries, keys]: true where query i may see key j -- same document
// (query_ids[:, i] == key_ids[:, j]) and, with `causal`, j <= i (queries and keys then the same
// positions). query_ids: int64 [rows, queries]; key_ids: int64 [rows, keys].
at::Tensor document_causal_mask(const at::Tensor& query_ids, const at::Tensor& key_ids, bool causal);

// What one block of ring attention may see: the queries of global chunk `query_chunk` against the
// keys of global chunk `key_chunk` (context_parallel_attention.h), under the causal mask and, when
// `query_ids` is defined, the document mask.
struct BlockMask {
  enum class Kind {
    kNone,    // nothing: a later chunk, or no document in common (the block is skipped)
    kCausal,  // the diagonal block within one document: the causal mask alone
    kFull,    // every key: an earlier chunk within the queries' document
    kMasked,  // the documents cut it: `additive` and `rows_seeing` say how
  };
  Kind kind = Kind::kNone;
  at::Tensor additive;     // kMasked: [rows, 1, queries, keys], 0 where seen, -inf elsewhere
  at::Tensor rows_seeing;  // kMasked: bool [rows, 1, queries], queries that see at least one key here
};

// query_ids, key_ids: int64 [rows, chunk], the documents of the two chunks (undefined: no document
// mask); `dtype`: the additive mask's (the queries').
BlockMask block_mask(int64_t query_chunk, int64_t key_chunk, const at::Tensor& query_ids,
                     const at::Tensor& key_ids, at::ScalarType dtype);

}  // namespace atl::parallel
