// Context parallelism: the sequence split across a group of `cp` ranks, and ring attention, the
// causal attention of the whole sequence computed from each rank's part of it.
//
// The sequence is cut into 2*cp equal chunks and each rank holds two of them. Load-balanced (the
// default, Megatron's and TorchTitan's head-tail split) rank i holds chunks i and 2*cp-1-i, so every
// rank does the same causal work; unbalanced, rank i holds chunks 2i and 2i+1 (a contiguous split,
// whose last rank does most of the work).
//
// Ring attention: each rank attends its queries to its own K/V first, then to the K/V of the rank
// before it, passed around the ring -- the next block's transfer started before the current one is
// computed -- and merges the partial outputs exactly by their log-sum-exp. Blocks the causal mask
// (or the document mask, document_mask.h) leaves empty are skipped. The backward passes the K/V
// around the ring again with their dK/dV, which travel on with each K/V block and arrive home once
// every rank has added its part.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <cstdint>

#include "comm/communicator.h"

namespace atl::parallel {

class RingMasks;

// The global indices of the two chunks (of 2*cp) that rank `rank` holds, in the order it holds them.
std::array<int64_t, 2> context_chunks(int cp, int rank, bool load_balanced);

// This rank's two chunks of `full` along `dim`, concatenated: what it holds of a tensor of the whole
// sequence (token ids, labels, positions). Throws std::invalid_argument naming the lengths unless
// the dimension divides into 2*cp chunks.
at::Tensor take_context_chunks(const at::Tensor& full, int64_t dim, int cp, int rank, bool load_balanced);

// Causal attention over the whole sequence from this rank's part of it, over the context-parallel
// group `cp` (which must outlive the autograd graph). With `document_ids` (int64 [batch, seq] of the
// WHOLE sequences, document_mask.h), a query sees only the keys of its own document, and blocks
// that share no document are skipped like those the causal mask empties.
// q: [batch, heads, 2*chunk, head_dim]; k, v: [batch, kv_heads, 2*chunk, head_dim] with kv_heads
// dividing heads (grouped-query attention: only the kv heads travel). Each holds this rank's
// chunks as take_context_chunks(sequence, 2, ...) returns them. Returns [batch, heads, 2*chunk,
// head_dim]: this rank's rows of the whole sequence's attention. On the CPU or a GPU, each block
// through SDPA's fused kernels that return the log-sum-exp (ring_block_kernels.h).
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          comm::Communicator& cp, bool load_balanced = true,
                          const at::Tensor& document_ids = {});

// The same with the microbatch's masks built once (ring_masks.h) for this rank of `cp`: what the
// model calls, every layer's forward and backward reading the same masks.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          comm::Communicator& cp, const c10::intrusive_ptr<RingMasks>& masks);

}  // namespace atl::parallel
