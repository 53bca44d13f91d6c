#include "runtime/model/sink_linear.h"

#include <torch/torch.h>

#include "parallel/context_pointer.h"

namespace atl::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The product is computed by the caller (autograd's inputs must be defined tensors). With a sink the
// weight enters detached, so autograd records no edge to it: its gradient leaves through the sink
// alone. The sink (or null) travels as its address (parallel/context_pointer.h): it outlives every
// graph built during training, as the data-parallel engine does.
class LinearFromProduct : public torch::autograd::Function<LinearFromProduct> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& product, parallel::WeightGradientSink* sink) {
    ctx->save_for_backward({x, weight});
    parallel::save_pointer(ctx, "sink", sink);
    return product.view_as(product);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1];
    variable_list result(4);
    if (!grads[0].defined()) return result;
    // at::linear's backward over the flattened rows: dx = dy W, dW = dy^T x.
    const at::Tensor dy = grads[0].reshape({-1, grads[0].size(-1)});
    const at::Tensor x_rows = x.reshape({-1, x.size(-1)});
    if (ctx->needs_input_grad(0)) result[0] = dy.mm(weight).reshape(x.sizes());
    if (auto* sink = parallel::saved_pointer<parallel::WeightGradientSink>(ctx, "sink"))
      sink->land_weight_gradient(weight, dy, x_rows);
    else if (ctx->needs_input_grad(1))
      result[1] = dy.t().mm(x_rows);
    return result;
  }
};

}  // namespace

bool hands_to_sink(const parallel::WeightGradientSink* sink, const at::Tensor& x, const at::Tensor& weight) {
  return sink && at::GradMode::is_enabled() && weight.requires_grad() && x.requires_grad() &&
         sink->receives(weight);
}

at::Tensor linear_from_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& product,
                               parallel::WeightGradientSink* sink) {
  const at::Tensor w = sink ? weight.detach() : weight;
  at::Tensor y = product;
  if (!y.defined()) {
    at::NoGradGuard no_grad;  // as inside a custom function's forward: recorded by LinearFromProduct alone
    y = at::linear(x, w);
  }
  return LinearFromProduct::apply(x, w, y, sink);
}

}  // namespace atl::runtime
