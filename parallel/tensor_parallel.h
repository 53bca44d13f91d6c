// Tensor parallelism with Megatron's semantics (DESIGN §5), as autograd functions over a
// Communicator (the tp group), so they work for CPU tensors (MPI) and CUDA tensors (NCCL) alike.
//
//   copy_to_tp_region      forward identity,   backward all-reduce  (input of a column-parallel layer)
//   reduce_from_tp_region  forward all-reduce, backward identity    (output of a row-parallel layer)
//
// A column-parallel linear holds rows [r*out/tp, (r+1)*out/tp) of the weight and produces that
// slice of the output features from an input that entered the tensor-parallel region
// (enter_tp_region); a row-parallel linear holds the matching columns, and its partial products
// leave the region summed over the group (exit_tp_region). The vocabulary-parallel embedding and
// cross-entropy split the vocabulary rows the same way and never gather the full logits.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "comm/communicator.h"

namespace atl::parallel {

at::Tensor copy_to_tp_region(const at::Tensor& x, comm::Communicator& tp);
at::Tensor reduce_from_tp_region(const at::Tensor& x, comm::Communicator& tp);

// Sequence parallelism (Megatron-SP): activations outside attention and MLP are split along the
// sequence (dim 1 of [batch, seq, hidden]); these gather the sequence before a column-parallel
// layer and reduce-scatter it after a row-parallel one, replacing copy_to / reduce_from.
//   gather_sequence          forward all-gather,     backward reduce-scatter
//   reduce_scatter_sequence  forward reduce-scatter, backward all-gather
// The sequence length must divide by the group size: reduce_scatter_sequence throws
// std::invalid_argument naming both where it does not.
at::Tensor gather_sequence(const at::Tensor& x_shard, comm::Communicator& tp);
at::Tensor reduce_scatter_sequence(const at::Tensor& x, comm::Communicator& tp);

// The way into the tensor-parallel region before a column-parallel layer (x W_shard^T, W_shard:
// [out/tp, in]) and out of it after a row-parallel one (the partial x_shard W_shard^T, W_shard:
// [out, in/tp], summed over the group): copy_to_tp_region / reduce_from_tp_region, or with
// `sequence_parallel` gather_sequence / reduce_scatter_sequence. What the model runs around q/k/v
// and o_proj, gate/up and down_proj, and the LM head.
at::Tensor enter_tp_region(const at::Tensor& x, comm::Communicator& tp, bool sequence_parallel);
at::Tensor exit_tp_region(const at::Tensor& partial, comm::Communicator& tp, bool sequence_parallel);

// The vocabulary rows [vocab_start, vocab_start + rows) this rank holds of a padded vocabulary.
struct VocabShard {
  int64_t start;
  int64_t rows;
};
VocabShard vocab_shard(int64_t padded_vocab, int tp_size, int tp_rank);

// Embedding lookup with the table split by rows: ids outside this rank's rows contribute zeros,
// and an all-reduce over the group completes every row (with sequence parallelism, a reduce-scatter
// along the sequence).
at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight_shard,
                                    int64_t vocab_start, comm::Communicator& tp,
                                    bool sequence_parallel = false);

// Mean cross-entropy over targets != ignore_index, from logits split by vocabulary columns
// ([tokens, rows] per rank, columns >= `vocab` -- padding -- excluded). Forward all-reduces the
// row max, the sum of exponentials and the target logit; backward is local.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits_shard, const at::Tensor& targets,
                                        int64_t vocab_start, int64_t vocab, comm::Communicator& tp,
                                        int64_t ignore_index = -100);

}  // namespace atl::parallel
