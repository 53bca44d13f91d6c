#include "parallel/context_parallel_attention.h"

#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "parallel/context_pointer.h"
#include "parallel/document_mask.h"
#include "parallel/ring_block_kernels.h"
#include "parallel/ring_masks.h"

namespace atl::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Tags of the ring's two kinds of message, so that a rank's K/V and the gradients travelling
// behind them can never be matched with each other.
constexpr int kKeyValueTag = 0;
constexpr int kGradientTag = 1;

// The ring of the group: each rank passes to the next and receives from the one before.
class Ring {
 public:
  explicit Ring(comm::Communicator& group)
      : group_(group),
        next_((group.rank() + 1) % group.size()),
        prev_((group.rank() + group.size() - 1) % group.size()) {}

  // Starts sending `outgoing` to the next rank and receiving as many tensors like them from the one
  // before into `incoming` (allocated here).
  comm::WorkPtr pass(const std::vector<at::Tensor>& outgoing, std::vector<at::Tensor>& incoming, int tag) {
    std::vector<comm::P2POp> ops;
    incoming.clear();
    for (const at::Tensor& tensor : outgoing) {
      incoming.push_back(at::empty_like(tensor));
      ops.push_back({comm::P2POp::Kind::kSend, tensor, next_, tag});
      ops.push_back({comm::P2POp::Kind::kRecv, incoming.back(), prev_, tag});
    }
    return group_.batch_p2p(ops);
  }

 private:
  comm::Communicator& group_;
  int next_, prev_;
};

// K/V heads repeated for their query heads (grouped-query attention), and the gradient of that.
at::Tensor expand_heads(const at::Tensor& kv, int64_t groups) {
  return groups == 1 ? kv : kv.repeat_interleave(groups, 1);
}

at::Tensor reduce_heads(const at::Tensor& grad, int64_t groups) {
  if (groups == 1) return grad;
  const auto s = grad.sizes();
  return grad.view({s[0], s[1] / groups, groups, s[2], s[3]}).sum(2);
}

at::Tensor chunk_of(const at::Tensor& local, int64_t index) {
  const int64_t chunk = local.size(2) / 2;
  return local.narrow(2, index * chunk, chunk);
}

// Adds a block's partial attention (its output and the log-sum-exp of its scores, per query) to
// the running one: both outputs weighted by their share of the combined softmax denominator. A query
// that sees no key of a block has a log-sum-exp of -inf there, whose share is exp(-inf) = 0; where
// neither side has seen a key the shares are 0 rather than exp(-inf + inf) (not reached while each
// rank's diagonal blocks come first, but the merge does not depend on the order of blocks).
void merge_block(at::Tensor& out, at::Tensor& lse, const at::Tensor& block_out, const at::Tensor& block_lse) {
  const at::Tensor block_out32 = block_out.to(at::kFloat), block_lse32 = block_lse.to(at::kFloat);
  if (!out.defined()) {
    out = block_out32.clone();
    lse = block_lse32.clone();
    return;
  }
  const at::Tensor merged = at::logaddexp(lse, block_lse32);
  const at::Tensor nothing_seen = merged.isneginf();
  const auto share = [&](const at::Tensor& part_lse) {
    return at::where(nothing_seen, 0.0, (part_lse - merged).exp()).unsqueeze(-1);
  };
  out = out * share(lse) + block_out32 * share(block_lse32);
  lse = merged;
}

c10::intrusive_ptr<RingMasks> saved_masks(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<RingMasks>(ctx->saved_data.at("masks").toCapsule());
}

class RingAttention : public torch::autograd::Function<RingAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, comm::Communicator* group,
                            const c10::intrusive_ptr<RingMasks>& masks) {
    const int cp = group->size();
    const int64_t groups = q.size(1) / k.size(1);
    Ring ring(*group);
    const std::shared_ptr<void> progress = cp > 1 ? group->progress_in_background() : nullptr;

    std::array<at::Tensor, 2> out, lse;
    std::vector<at::Tensor> kv{k.contiguous(), v.contiguous()}, next_kv;
    for (int step = 0; step < cp; ++step) {
      const comm::WorkPtr arriving = step + 1 < cp ? ring.pass(kv, next_kv, kKeyValueTag) : nullptr;
      const at::Tensor keys = expand_heads(kv[0], groups), values = expand_heads(kv[1], groups);
      for (const RingMasks::Block& block : masks->step(step)) {
        const BlockAttention part = attend_block(chunk_of(q, block.query), chunk_of(keys, block.key),
                                                 chunk_of(values, block.key), block.mask);
        merge_block(out[block.query], lse[block.query], part.out, part.lse);
      }
      if (arriving) {
        arriving->wait();
        kv = std::move(next_kv);
      }
    }
    const at::Tensor result = at::cat({out[0], out[1]}, 2).to(q.scalar_type());
    ctx->save_for_backward({q, k, v, result, at::cat({lse[0], lse[1]}, 2)});
    save_pointer(ctx, "group", group);
    ctx->saved_data["masks"] = c10::IValue::make_capsule(masks);
    return result;
  }

  // Each block's gradients from the whole sequence's output and log-sum-exp: the softmax of the
  // block's scores against the complete denominator is exactly its share of the attention.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    auto* group = saved_pointer<comm::Communicator>(ctx, "group");
    const c10::intrusive_ptr<RingMasks> masks = saved_masks(ctx);
    const int cp = group->size();
    const int64_t groups = q.size(1) / k.size(1), chunk = q.size(2) / 2;
    const at::Tensor d_out = grads[0].contiguous();
    Ring ring(*group);
    const std::shared_ptr<void> progress = cp > 1 ? group->progress_in_background() : nullptr;

    at::Tensor d_q = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    std::vector<at::Tensor> kv{k.contiguous(), v.contiguous()}, next_kv;
    // The dK/dV of the K/V this rank holds, as the ranks before it left them (in flight until
    // `grads_arriving` completes), and those coming in with the next K/V.
    std::vector<at::Tensor> d_kv, next_d_kv;
    comm::WorkPtr grads_arriving;
    for (int step = 0; step < cp; ++step) {
      const comm::WorkPtr arriving = step + 1 < cp ? ring.pass(kv, next_kv, kKeyValueTag) : nullptr;
      const at::Tensor keys = expand_heads(kv[0], groups), values = expand_heads(kv[1], groups);
      std::vector<at::Tensor> ours{at::zeros(k.sizes(), d_q.options()), at::zeros(v.sizes(), d_q.options())};
      for (const RingMasks::Block& block : masks->step(step)) {
        const int64_t a = block.query, b = block.key;
        const BlockGradients part = attend_block_backward(
            chunk_of(d_out, a).contiguous(), chunk_of(q, a), chunk_of(keys, b), chunk_of(values, b),
            chunk_of(out, a).contiguous(), lse.narrow(2, a * chunk, chunk).contiguous(), block.mask);
        chunk_of(d_q, a).add_(part.dq);
        chunk_of(ours[0], b).add_(reduce_heads(part.dk, groups));
        chunk_of(ours[1], b).add_(reduce_heads(part.dv, groups));
      }
      if (grads_arriving) {
        grads_arriving->wait();
        d_kv = std::move(next_d_kv);
        d_kv[0].add_(ours[0]);
        d_kv[1].add_(ours[1]);
      } else {
        d_kv = std::move(ours);
      }
      // Every rank has added its part once the gradients have gone round: the last pass takes them home.
      if (cp > 1) grads_arriving = ring.pass(d_kv, next_d_kv, kGradientTag);
      if (arriving) {
        arriving->wait();
        kv = std::move(next_kv);
      }
    }
    if (grads_arriving) {
      grads_arriving->wait();
      d_kv = std::move(next_d_kv);
    }
    return {d_q.to(q.scalar_type()), d_kv[0].to(k.scalar_type()), d_kv[1].to(v.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

std::array<int64_t, 2> context_chunks(int cp, int rank, bool load_balanced) {
  if (load_balanced) return {rank, 2 * cp - 1 - rank};
  return {2 * rank, 2 * rank + 1};
}

at::Tensor take_context_chunks(const at::Tensor& full, int64_t dim, int cp, int rank, bool load_balanced) {
  const int64_t length = full.size(dim);
  if (length % (2 * cp) != 0)
    throw std::invalid_argument("context parallelism: a sequence of " + std::to_string(length) +
                                " does not split into 2 x cp = " + std::to_string(2 * cp) + " equal chunks");
  const int64_t chunk = length / (2 * cp);
  const auto chunks = context_chunks(cp, rank, load_balanced);
  return at::cat({full.narrow(dim, chunks[0] * chunk, chunk), full.narrow(dim, chunks[1] * chunk, chunk)},
                 dim);
}

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          comm::Communicator& cp, bool load_balanced, const at::Tensor& document_ids) {
  const int64_t sequence = q.size(2) * cp.size();
  if (document_ids.defined() && !document_ids.sizes().equals({q.size(0), sequence}))
    throw std::invalid_argument("ring_attention: document ids of shape " + c10::str(document_ids.sizes()) +
                                " for " + std::to_string(q.size(0)) + " sequences of " +
                                std::to_string(sequence) + " positions: they must be the whole sequences' [" +
                                std::to_string(q.size(0)) + ", " + std::to_string(sequence) + "]");
  return ring_attention(
      q, k, v, cp,
      c10::make_intrusive<RingMasks>(cp.size(), cp.rank(), load_balanced, document_ids, q.scalar_type()));
}

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          comm::Communicator& cp, const c10::intrusive_ptr<RingMasks>& masks) {
  if (q.size(1) % k.size(1) != 0 || q.size(2) % 2 != 0 || k.sizes() != v.sizes() || q.size(2) != k.size(2))
    throw std::invalid_argument(
        "ring_attention: q " + std::to_string(q.size(1)) + " heads x " + std::to_string(q.size(2)) +
        " positions, k/v " + std::to_string(k.size(1)) + " heads x " + std::to_string(k.size(2)) +
        " positions: the kv heads must divide the heads and both hold the same two chunks");
  if (masks->cp() != cp.size() || masks->rank() != cp.rank() ||
      (masks->document_ids().defined() && masks->document_ids().size(0) != q.size(0)))
    throw std::invalid_argument("ring_attention: masks built for rank " + std::to_string(masks->rank()) +
                                " of " + std::to_string(masks->cp()) + " used on rank " +
                                std::to_string(cp.rank()) + " of " + std::to_string(cp.size()) +
                                " or for another batch");
  return RingAttention::apply(q, k, v, &cp, masks);
}

}  // namespace atl::parallel
