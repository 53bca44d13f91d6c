#include "runtime/model/attention.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace atl::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CausalAttention : public torch::autograd::Function<CausalAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& mask) {
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), head_dim = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    // The scale goes on q, a head_dim-wide tensor, rather than on the seq-wide scores.
    const at::Tensor q_scaled = (q * scale).reshape({batch * heads, seq, head_dim});
    const at::Tensor k3 = k.reshape({batch * heads, seq, head_dim}).contiguous();
    const at::Tensor v3 = v.reshape({batch * heads, seq, head_dim}).contiguous();
    // Not baddbmm: with a broadcast mask it took a slow path on CPU (LibTorch 1.13: 25-37 ms vs
    // 3.6 ms for bmm + an in-place add at 64x256x256).
    at::Tensor probs = at::bmm(q_scaled, k3.transpose(1, 2)).add_(mask);
    probs = at::softmax(probs, -1);
    at::Tensor out = at::bmm(probs, v3);
    ctx->save_for_backward({q_scaled, k3, v3, probs, out});
    ctx->saved_data["scale"] = scale;
    return out.view({batch, heads, seq, head_dim});
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q_scaled = saved[0], &k3 = saved[1], &v3 = saved[2], &probs = saved[3], &out = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto shape = grads[0].sizes().vec();
    const at::Tensor d_out = grads[0].reshape(out.sizes()).contiguous();

    const at::Tensor d_v = at::bmm(probs.transpose(1, 2), d_out);
    // Softmax backward: dS = P * (dP - rowsum(dP * P)), and rowsum(dP * P) = rowsum(dO * O) -- the
    // FlashAttention identity, a head_dim-wide product instead of a seq-wide one.
    const at::Tensor row_dot = (d_out * out).sum(-1, /*keepdim=*/true);
    at::Tensor d_scores = at::bmm(d_out, v3.transpose(1, 2));
    d_scores.sub_(row_dot).mul_(probs);
    const at::Tensor d_q = at::bmm(d_scores, k3).mul_(scale);
    const at::Tensor d_k = at::bmm(d_scores.transpose(1, 2), q_scaled);
    return {d_q.view(shape), d_k.view(shape), d_v.view(shape), at::Tensor()};
  }
};

}  // namespace

at::Tensor causal_mask(int64_t seq, at::ScalarType dtype) {
  return at::full({seq, seq}, -std::numeric_limits<float>::infinity(), at::TensorOptions().dtype(dtype))
      .triu(1);
}

bool fused_attention_is_faster(at::ScalarType dtype, int64_t seq) {
  return dtype != at::kBFloat16 || seq > 512;
}

bool causal_attention_is_fused(bool cuda, at::ScalarType dtype, int64_t seq) {
  // On a GPU the fused kernel (flash or memory-efficient attention) is always the faster one.
  return cuda || fused_attention_is_faster(dtype, seq);
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask) {
  if (causal_attention_is_fused(q.is_cuda(), q.scalar_type(), q.size(2)))
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  return handwritten_causal_attention(q, k, v, mask);
}

at::Tensor grouped_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                          /*scale=*/std::nullopt, /*enable_gqa=*/true);
}

at::Tensor document_masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& mask) {
  // Repeated rather than SDPA's enable_gqa, which not every kernel that takes a mask takes.
  const int64_t groups = q.size(1) / k.size(1);
  const at::Tensor keys = groups == 1 ? k : k.repeat_interleave(groups, 1);
  const at::Tensor values = groups == 1 ? v : v.repeat_interleave(groups, 1);
  return at::scaled_dot_product_attention(q, keys, values, mask, /*dropout_p=*/0.0, /*is_causal=*/false);
}

at::Tensor handwritten_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& mask) {
  return CausalAttention::apply(q, k, v, mask);
}

}  // namespace atl::runtime
