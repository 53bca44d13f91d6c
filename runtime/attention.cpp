#include "runtime/attention.h"

#include <torch/torch.h>

#include <cmath>

namespace atl::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class CausalAttention : public torch::autograd::Function<CausalAttention> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask) {
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), head_dim = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const at::Tensor q3 = q.reshape({batch * heads, seq, head_dim}).contiguous();
    const at::Tensor k3 = k.reshape({batch * heads, seq, head_dim}).contiguous();
    const at::Tensor v3 = v.reshape({batch * heads, seq, head_dim}).contiguous();
    // scores = scale * q k^T + mask. Not baddbmm: with a broadcast mask LibTorch 1.13 takes a slow
    // path on CPU (measured 25-37 ms vs 3.6 ms for bmm + two in-place passes at 64x256x256).
    at::Tensor probs = at::bmm(q3, k3.transpose(1, 2)).mul_(scale).add_(mask);
    probs = at::_softmax(probs, -1, false);
    at::Tensor out = at::bmm(probs, v3);
    ctx->save_for_backward({q3, k3, v3, probs});
    ctx->saved_data["scale"] = scale;
    return out.view({batch, heads, seq, head_dim});
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q3 = saved[0], &k3 = saved[1], &v3 = saved[2], &probs = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor& grad_out = grads[0];
    const auto shape = grad_out.sizes().vec();
    const at::Tensor d_out = grad_out.reshape({q3.size(0), q3.size(1), q3.size(2)}).contiguous();

    const at::Tensor d_v = at::bmm(probs.transpose(1, 2), d_out);
    at::Tensor d_scores = at::bmm(d_out, v3.transpose(1, 2));  // d probs
    // Softmax backward: dS = P * (dP - sum(dP * P)), then the scale of the forward product.
    const at::Tensor row_dot = (d_scores * probs).sum(-1, /*keepdim=*/true);
    d_scores.sub_(row_dot).mul_(probs).mul_(scale);
    const at::Tensor d_q = at::bmm(d_scores, k3);
    const at::Tensor d_k = at::bmm(d_scores.transpose(1, 2), q3);
    return {d_q.view(shape), d_k.view(shape), d_v.view(shape), at::Tensor()};
  }
};

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask) {
  return CausalAttention::apply(q, k, v, mask);
}

}  // namespace atl::runtime
