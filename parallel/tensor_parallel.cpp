#include "parallel/tensor_parallel.h"

#include <torch/torch.h>

#include "parallel/context_pointer.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace atl::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group travels as its address (context_pointer.h): the Communicator is owned by the
// DeviceMesh, which outlives every graph built during training.
void save_group(AutogradContext* ctx, comm::Communicator& tp) {
  save_pointer(ctx, "tp", &tp);
}
comm::Communicator& saved_group(AutogradContext* ctx) {
  return *saved_pointer<comm::Communicator>(ctx, "tp");
}

at::Tensor all_reduced(const at::Tensor& x, comm::Communicator& tp,
                       comm::ReduceOp op = comm::ReduceOp::kSum) {
  at::Tensor out = x.contiguous().clone();
  tp.all_reduce(out, op)->wait();
  return out;
}

// [batch, seq, ...] <-> [seq, batch, ...]: with the sequence outermost, a rank's sequence shard is
// one contiguous block of the flat tensor, which is what the communicator's shards are.
at::Tensor gather_seq_impl(const at::Tensor& shard, comm::Communicator& tp) {
  const at::Tensor seq_major = shard.transpose(0, 1).contiguous();
  std::vector<int64_t> full_shape = seq_major.sizes().vec();
  full_shape[0] *= tp.size();
  at::Tensor full = at::empty(full_shape, seq_major.options());
  tp.all_gather(seq_major.view({-1}), full.view({-1}))->wait();
  return full.transpose(0, 1);
}

at::Tensor reduce_scatter_seq_impl(const at::Tensor& x, comm::Communicator& tp) {
  const at::Tensor seq_major = x.transpose(0, 1).contiguous();
  std::vector<int64_t> shard_shape = seq_major.sizes().vec();
  shard_shape[0] /= tp.size();
  at::Tensor shard = at::empty(shard_shape, seq_major.options());
  tp.reduce_scatter(seq_major.view({-1}), shard.view({-1}), comm::ReduceOp::kSum)->wait();
  return shard.transpose(0, 1);
}

class GatherSequence : public torch::autograd::Function<GatherSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    // Contiguous once here, rather than a copy in each column-parallel layer that reads it (q, k
    // and v; gate and up), each kept for its backward.
    return gather_seq_impl(x, *tp).contiguous();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter_seq_impl(grads[0], saved_group(ctx)), at::Tensor()};
  }
};

class ReduceScatterSequence : public torch::autograd::Function<ReduceScatterSequence> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    return reduce_scatter_seq_impl(x, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {gather_seq_impl(grads[0], saved_group(ctx)), at::Tensor()};
  }
};

class CopyToRegion : public torch::autograd::Function<CopyToRegion> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* tp) {
    save_group(ctx, *tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduced(grads[0], saved_group(ctx)), at::Tensor()};
  }
};

class ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& x, comm::Communicator* tp) {
    return all_reduced(x, *tp);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

class VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            int64_t vocab_start, int64_t vocab, comm::Communicator* tp,
                            int64_t ignore_index) {
    at::NoGradGuard no_grad;
    const int64_t rows = logits.size(1);
    // Padding columns (global id >= vocab) get -inf so they vanish from the softmax.
    const int64_t real_rows = std::clamp<int64_t>(vocab - vocab_start, 0, rows);
    at::Tensor shifted = logits.clone();
    if (real_rows < rows)
      shifted.narrow(1, real_rows, rows - real_rows).fill_(-std::numeric_limits<float>::infinity());

    const at::Tensor row_max =
        all_reduced(std::get<0>(shifted.max(1, /*keepdim=*/true)), *tp, comm::ReduceOp::kMax);
    shifted.sub_(row_max);
    at::Tensor exp = shifted.exp();
    const at::Tensor sum_exp = all_reduced(exp.sum(1, /*keepdim=*/true), *tp);

    const at::Tensor valid = targets.ne(ignore_index);
    const at::Tensor local = targets - vocab_start;
    const at::Tensor mine = valid & local.ge(0) & local.lt(real_rows);
    const at::Tensor index = local.clamp(0, rows - 1).unsqueeze(1);
    // where, not a product with the mask: a rank holding only padding gathers -inf, and -inf * 0 is NaN.
    at::Tensor target_logit =
        at::where(mine, shifted.gather(1, index).squeeze(1), at::zeros({}, shifted.options()));
    target_logit = all_reduced(target_logit, *tp);

    const at::Tensor per_token = (sum_exp.squeeze(1).log() - target_logit) * valid;
    // The label count stays on the device: reading it on the host would stall the host's queue of
    // GPU work once per microbatch. In fp32, where a whole count up to 2^24 is exact.
    const at::Tensor count = valid.sum().clamp_min(1).to(at::kFloat);
    exp.div_(sum_exp);  // the softmax, kept for backward
    ctx->save_for_backward({exp, index, mine, valid, count});
    return (per_token.sum() / count).to(per_token.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &softmax = saved[0], &index = saved[1], &mine = saved[2], &valid = saved[3],
                     &count = saved[4];
    // d loss / d logit = (softmax - onehot(target)) / count, on valid tokens only.
    at::Tensor grad = softmax.clone();
    // One entry per row, written in place: index_put_ has a deterministic CUDA kernel, a 2-D
    // scatter_add_ none (run.deterministic refuses it). x - m equals x + (-m) bit for bit.
    const at::Tensor row = at::arange(grad.size(0), index.options());
    const at::Tensor column = index.squeeze(1);
    grad.index_put_({row, column}, grad.index({row, column}).sub_(mine.to(grad.scalar_type())));
    grad.mul_(valid.to(grad.scalar_type()).unsqueeze(1)).mul_(grads[0] / count);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_tp_region(const at::Tensor& x, comm::Communicator& tp) {
  if (tp.size() == 1) return x;
  return CopyToRegion::apply(x, &tp);
}

at::Tensor reduce_from_tp_region(const at::Tensor& x, comm::Communicator& tp) {
  if (tp.size() == 1) return x;
  return ReduceFromRegion::apply(x, &tp);
}

at::Tensor gather_sequence(const at::Tensor& x_shard, comm::Communicator& tp) {
  if (tp.size() == 1) return x_shard;
  return GatherSequence::apply(x_shard, &tp);
}

at::Tensor reduce_scatter_sequence(const at::Tensor& x, comm::Communicator& tp) {
  // Checked here, on every rank alike (the shapes agree), rather than left to the communicator,
  // whose refusal of the uneven shards would not say why they are uneven.
  if (x.size(1) % tp.size() != 0)
    throw std::invalid_argument("sequence parallelism: the sequence length " + std::to_string(x.size(1)) +
                                " is not divisible by the tensor-parallel size " + std::to_string(tp.size()) +
                                "; each rank holds seq/tp positions, so pick a model.seq that parallel.tp "
                                "divides");
  if (tp.size() == 1) return x;
  return ReduceScatterSequence::apply(x, &tp);
}

at::Tensor enter_tp_region(const at::Tensor& x, comm::Communicator& tp, bool sequence_parallel) {
  return sequence_parallel ? gather_sequence(x, tp) : copy_to_tp_region(x, tp);
}

at::Tensor exit_tp_region(const at::Tensor& partial, comm::Communicator& tp, bool sequence_parallel) {
  return sequence_parallel ? reduce_scatter_sequence(partial, tp) : reduce_from_tp_region(partial, tp);
}

VocabShard vocab_shard(int64_t padded_vocab, int tp_size, int tp_rank) {
  const int64_t rows = padded_vocab / tp_size;
  return {rows * tp_rank, rows};
}

at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight_shard,
                                    int64_t vocab_start, comm::Communicator& tp, bool sequence_parallel) {
  if (tp.size() == 1) return at::embedding(weight_shard, ids);
  const int64_t rows = weight_shard.size(0);
  const at::Tensor local = ids - vocab_start;
  const at::Tensor outside = local.lt(0) | local.ge(rows);
  at::Tensor out = at::embedding(weight_shard, local.masked_fill(outside, 0));
  out = out.masked_fill(outside.unsqueeze(-1), 0.0);
  return exit_tp_region(out, tp, sequence_parallel);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits_shard, const at::Tensor& targets,
                                        int64_t vocab_start, int64_t vocab, comm::Communicator& tp,
                                        int64_t ignore_index) {
  return VocabParallelCrossEntropy::apply(logits_shard, targets, vocab_start, vocab, &tp, ignore_index);
}

}  // namespace atl::parallel
