// Tensor parallelism with Megatron's semantics (DESIGN §5), as autograd functions over a
// Communicator (the tp group), so they work for CPU tensors (MPI) and CUDA tensors (NCCL) alike.
//
//   copy_to_tp_region      forward identity,   backward all-reduce  (input of a column-parallel layer)
//   reduce_from_tp_region  forward all-reduce, backward identity    (output of a row-parallel layer)
//
// A column-parallel linear holds rows [r*out/tp, (r+1)*out/tp) of the weight and produces that
// slice of the output features; a row-parallel linear holds the matching columns and sums the
// partial products over the group. The vocabulary-parallel embedding and cross-entropy split the
// vocabulary rows the same way and never gather the full logits.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "comm/communicator.h"

namespace atl::parallel {

at::Tensor copy_to_tp_region(const at::Tensor& x, comm::Communicator& tp);
at::Tensor reduce_from_tp_region(const at::Tensor& x, comm::Communicator& tp);

// y_shard = x W_shard^T, W_shard: [out/tp, in]. x is replicated over the group.
at::Tensor column_parallel_linear(const at::Tensor& x, const at::Tensor& weight_shard,
                                  comm::Communicator& tp);
// y = sum over ranks of x_shard W_shard^T, W_shard: [out, in/tp]. y is replicated over the group.
at::Tensor row_parallel_linear(const at::Tensor& x_shard, const at::Tensor& weight_shard,
                               comm::Communicator& tp);

// Sequence parallelism (Megatron-SP): activations outside attention and MLP are split along the
// sequence (dim 1 of [batch, seq, hidden]); these gather the sequence before a column-parallel
// layer and reduce-scatter it after a row-parallel one, replacing copy_to / reduce_from.
//   gather_sequence          forward all-gather,     backward reduce-scatter
//   reduce_scatter_sequence  forward reduce-scatter, backward all-gather
// The sequence length must divide by the group size.
at::Tensor gather_sequence(const at::Tensor& x_shard, comm::Communicator& tp);
at::Tensor reduce_scatter_sequence(const at::Tensor& x, comm::Communicator& tp);

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
