#include "parallel/ring_block_kernels.h"

#include <ATen/ATen.h>

#include <limits>
#include <optional>

namespace atl::parallel {
namespace {

bool causal_of(const BlockMask& seen) {
  return seen.kind == BlockMask::Kind::kCausal;
}

// A document-cut block's mask, additive, in the queries' dtype (the masks are built in the model's
// compute dtype); none for the other kinds.
std::optional<at::Tensor> additive_of(const BlockMask& seen, at::ScalarType dtype) {
  if (seen.kind != BlockMask::Kind::kMasked) return std::nullopt;
  return seen.additive.to(dtype);
}

// The memory-efficient kernel reads its bias per head, in rows aligned to 16 elements (SDPA pads a
// mask so before calling it).
at::Tensor efficient_bias(const at::Tensor& additive, int64_t heads) {
  const int64_t rows = additive.size(0), queries = additive.size(2), keys = additive.size(3);
  at::Tensor aligned =
      at::zeros({rows, 1, queries, (keys + 15) / 16 * 16}, additive.options()).narrow(-1, 0, keys);
  aligned.copy_(additive);
  return aligned.expand({rows, heads, queries, keys});
}

// The flash kernel computes in bf16 and fp16 only, and takes no additive mask.
bool flash_takes(const at::Tensor& q, const BlockMask& seen) {
  return seen.kind != BlockMask::Kind::kMasked &&
         (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf);
}

// A query that sees no key of a document-cut block counts in the merge with a log-sum-exp of -inf
// and an output of 0, whatever the kernel reports for it (the CPU kernel: a log-sum-exp of 0).
BlockAttention seen_rows_only(BlockAttention block, const BlockMask& seen) {
  if (!seen.rows_seeing.defined()) return block;
  block.lse = at::where(seen.rows_seeing, block.lse, -std::numeric_limits<double>::infinity());
  block.out = block.out.masked_fill(seen.rows_seeing.logical_not().unsqueeze(-1), 0.0);
  return block;
}

}  // namespace

BlockAttention attend_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const BlockMask& seen) {
  const std::optional<at::Tensor> additive = additive_of(seen, q.scalar_type());
  if (q.is_cpu()) {
    const auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, /*dropout_p=*/0.0,
                                                                            causal_of(seen), additive);
    return seen_rows_only({out, lse}, seen);
  }
  const int64_t queries = q.size(2);
  if (flash_takes(q, seen)) {
    const auto result = at::_scaled_dot_product_flash_attention(q, k, v, /*dropout_p=*/0.0, causal_of(seen));
    return {std::get<0>(result), std::get<1>(result).narrow(2, 0, queries)};
  }
  const auto result = at::_scaled_dot_product_efficient_attention(
      q, k, v, additive ? std::optional<at::Tensor>(efficient_bias(*additive, q.size(1))) : std::nullopt,
      /*compute_log_sumexp=*/true, /*dropout_p=*/0.0, causal_of(seen));
  // Its log-sum-exp comes with the rows padded to a multiple of 32.
  return seen_rows_only({std::get<0>(result), std::get<1>(result).narrow(2, 0, queries)}, seen);
}

BlockGradients attend_block_backward(const at::Tensor& d_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                     const BlockMask& seen) {
  const std::optional<at::Tensor> additive = additive_of(seen, q.scalar_type());
  if (q.is_cpu()) {
    const auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        d_out, q, k, v, out, lse, /*dropout_p=*/0.0, causal_of(seen), additive);
    return {dq, dk, dv};
  }
  // Dropout is off: the kernels read no random state (their forwards return such empty tensors).
  const at::Tensor no_rng = at::empty({}, at::TensorOptions().dtype(at::kLong));
  const int64_t queries = q.size(2), keys = k.size(2);
  if (flash_takes(q, seen)) {
    const auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_backward(
        d_out, q, k, v, out, lse, /*cum_seq_q=*/at::Tensor(), /*cum_seq_k=*/at::Tensor(), queries, keys,
        /*dropout_p=*/0.0, causal_of(seen), no_rng, no_rng);
    return {dq, dk, dv};
  }
  // The log-sum-exp as the memory-efficient forward returns it: rows padded to a multiple of 32.
  at::Tensor padded_lse = at::zeros({lse.size(0), lse.size(1), (queries + 31) / 32 * 32}, lse.options());
  padded_lse.narrow(2, 0, queries).copy_(lse);
  const auto [dq, dk, dv, d_bias] = at::_scaled_dot_product_efficient_attention_backward(
      d_out, q, k, v, additive ? efficient_bias(*additive, q.size(1)) : at::Tensor(), out, padded_lse, no_rng,
      no_rng, /*dropout_p=*/0.0, {true, true, true, false}, causal_of(seen));
  return {dq, dk, dv};
}

}  // namespace atl::parallel
