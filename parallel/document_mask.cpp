#include "parallel/document_mask.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace atl::parallel {

at::Tensor document_ids(const std::vector<std::vector<int32_t>>& starts, int64_t seq) {
  const auto rows = static_cast<int64_t>(starts.size());
  // A 1 at each start, summed along the row: the number of starts at or before each position.
  at::Tensor marks = at::zeros({rows, seq}, at::TensorOptions().dtype(at::kLong));
  int64_t* mark = marks.data_ptr<int64_t>();
  for (int64_t row = 0; row < rows; ++row) {
    int64_t previous = 0;
    for (const int32_t start : starts[static_cast<size_t>(row)]) {
      if (start <= previous || start >= seq)
        throw std::invalid_argument("document_ids: row " + std::to_string(row) + " has a document start at " +
                                    std::to_string(start) + ", outside (" + std::to_string(previous) + ", " +
                                    std::to_string(seq) + "): starts must ascend within [1, seq)");
      mark[row * seq + start] = 1;
      previous = start;
    }
  }
  return marks.cumsum(1);
}

at::Tensor document_causal_mask(const at::Tensor& query_ids, const at::Tensor& key_ids, bool causal) {
  at::Tensor mask = query_ids.unsqueeze(2).eq(key_ids.unsqueeze(1));
  if (causal) mask = mask.tril();
  return mask.unsqueeze(1);
}

BlockMask block_mask(int64_t query_chunk, int64_t key_chunk, const at::Tensor& query_ids,
                     const at::Tensor& key_ids, at::ScalarType dtype) {
  using Kind = BlockMask::Kind;
  if (key_chunk > query_chunk) return {};
  const bool diagonal = key_chunk == query_chunk;
  const Kind causal_kind = diagonal ? Kind::kCausal : Kind::kFull;
  if (!query_ids.defined()) return {causal_kind, {}, {}};
  // One document over both chunks in every row: the causal mask says it all.
  const at::Tensor first = query_ids.narrow(1, 0, 1);
  if (query_ids.eq(first).all().item<bool>() && key_ids.eq(first).all().item<bool>())
    return {causal_kind, {}, {}};
  const at::Tensor seen = document_causal_mask(query_ids, key_ids, diagonal);
  if (!seen.any().item<bool>()) return {};
  // The CPU flash kernel takes an additive mask of the queries' dtype (not a boolean one).
  const at::Tensor additive = at::zeros(seen.sizes(), query_ids.options().dtype(dtype))
                                  .masked_fill_(seen.logical_not(), -std::numeric_limits<double>::infinity());
  return {Kind::kMasked, additive, seen.any(-1)};
}

}  // namespace atl::parallel
