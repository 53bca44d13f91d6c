// The masks of one rank's ring attention over one microbatch (context_parallel_attention.h): for
// every ring step, the blocks of (this rank's query chunk, the visiting K/V's chunk) that the causal
// and document masks leave non-empty, each with what its queries see. Built once per microbatch from
// the document ids and read by every layer's ring attention, forward and backward: a block's mask
// costs a comparison over [rows, chunk, chunk] and host synchronisations, so building it per layer
// and again in backward would repeat that 2 x layers times.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

#include "parallel/document_mask.h"

namespace atl::parallel {

// A CustomClassHolder so that an autograd context can keep it (as an IValue capsule) until backward.
class RingMasks : public torch::CustomClassHolder {
 public:
  struct Block {
    int64_t query, key;  // this rank's query chunk and the visiting K/V's, 0 or 1 of the local two
    BlockMask mask;
  };

  // For rank `rank` of `cp` holding its chunks as context_chunks(cp, rank, load_balanced) gives
  // them. `document_ids`: int64 [batch, seq] of the WHOLE sequences (document_mask.h), or undefined
  // for the causal mask alone; `dtype`: the queries' (the additive masks'). Throws
  // std::invalid_argument unless seq divides into 2*cp chunks.
  RingMasks(int cp, int rank, bool load_balanced, const at::Tensor& document_ids, at::ScalarType dtype);

  int cp() const { return cp_; }
  int rank() const { return rank_; }
  bool load_balanced() const { return load_balanced_; }
  // The whole sequences' document ids (undefined: no document mask).
  const at::Tensor& document_ids() const { return document_ids_; }
  // The blocks ring step `step` computes: those of the K/V of rank (rank - step) mod cp.
  const std::vector<Block>& step(int step) const { return steps_.at(static_cast<size_t>(step)); }

 private:
  int cp_, rank_;
  bool load_balanced_;
  at::Tensor document_ids_;
  std::vector<std::vector<Block>> steps_;
};

}  // namespace atl::parallel
