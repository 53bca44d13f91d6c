#include "runtime/model/recompute.h"

#include <torch/torch.h>

#include <utility>

#include "runtime/model/fp8_linear.h"
#include "runtime/model/sink_linear.h"

namespace atl::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a region's node holds between its first run and its rerun. Autograd contexts keep only
// IValues: it travels as a capsule and dies with the node.
struct RegionState : torch::CustomClassHolder {
  Region region;
  std::vector<at::Tensor> parameters;
  LinearTape tape;
  bool keep_linear_outputs = false;
  LinearTape* tape_or_null() { return keep_linear_outputs ? &tape : nullptr; }
};

class RecomputedRegion : public torch::autograd::Function<RecomputedRegion> {
 public:
  // Runs with gradients off (as every custom function's forward): nothing is recorded.
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList parameters,
                               const c10::intrusive_ptr<RegionState>& state) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return state->region(inputs.vec(), parameters.vec(), state->tape_or_null());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto state = c10::static_intrusive_pointer_cast<RegionState>(ctx->saved_data["state"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const size_t n_inputs = saved.size(), n_parameters = state->parameters.size();
    // The rerun's leaves: the saved inputs and aliases of the parameters (the same storage, but no
    // hooks: ZeRO's must see each gradient land once, from this node's outputs).
    std::vector<at::Tensor> inputs, parameters;
    for (size_t i = 0; i < n_inputs; ++i)
      inputs.push_back(saved[i].detach().requires_grad_(ctx->needs_input_grad(i)));
    for (size_t j = 0; j < n_parameters; ++j)
      parameters.push_back(state->parameters[j].detach().requires_grad_(ctx->needs_input_grad(n_inputs + j)));
    state->tape.rewind();
    std::vector<at::Tensor> outputs;
    {
      at::AutoGradMode grad_on(true);
      outputs = state->region(inputs, parameters, state->tape_or_null());
    }
    variable_list roots, root_grads, wrt;
    std::vector<size_t> slots;  // where each of `wrt`'s gradients goes in this node's result
    for (size_t o = 0; o < outputs.size(); ++o)
      if (grads[o].defined() && outputs[o].requires_grad()) {
        roots.push_back(outputs[o]);
        root_grads.push_back(grads[o]);
      }
    for (size_t i = 0; i < n_inputs + n_parameters; ++i)
      if (ctx->needs_input_grad(i)) {
        wrt.push_back(i < n_inputs ? inputs[i] : parameters[i - n_inputs]);
        slots.push_back(i);
      }
    variable_list result(n_inputs + n_parameters + 1);  // + 1: the state argument
    if (!roots.empty() && !wrt.empty()) {
      const variable_list g = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false,
                                                    /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t k = 0; k < g.size(); ++k) result[slots[k]] = g[k];
    }
    state->tape = LinearTape();  // the kept products are spent: free them now, not with the graph
    return result;
  }
};

}  // namespace

at::Tensor LinearTape::linear(const at::Tensor& x, const at::Tensor& weight, Product use,
                              parallel::WeightGradientSink* sink, Fp8Linears* fp8) {
  if (!replaying_) {
    at::Tensor product = fp8 ? fp8->linear(x, weight) : at::linear(x, weight);
    kept_.push_back(use == Product::kRereadInBackward ? product : at::Tensor());
    return product;
  }
  at::Tensor product = kept_.at(next_++);
  if (!product.defined()) {  // not read again: zeros of its shape, without the memory
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    product = at::zeros({}, x.options()).expand(shape);
  }
  // Backward from x and W, as at::linear's (sink_linear.h), or as FP8's.
  if (fp8) return fp8->linear(x, weight, product);
  return linear_from_product(x, weight, product, hands_to_sink(sink, x, weight) ? sink : nullptr);
}

void LinearTape::rewind() {
  replaying_ = true;
  next_ = 0;
}

at::Tensor linear_through(LinearTape* tape, const at::Tensor& x, const at::Tensor& weight, Product use,
                          parallel::WeightGradientSink* sink, Fp8Linears* fp8) {
  if (tape) return tape->linear(x, weight, use, sink, fp8);
  if (fp8) return fp8->linear(x, weight);
  if (hands_to_sink(sink, x, weight)) return linear_from_product(x, weight, at::Tensor(), sink);
  return at::linear(x, weight);
}

std::vector<at::Tensor> run_recomputed(Region region, const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& parameters, bool keep_linear_outputs) {
  auto state = c10::make_intrusive<RegionState>();
  state->region = std::move(region);
  state->parameters = parameters;
  state->keep_linear_outputs = keep_linear_outputs;
  return RecomputedRegion::apply(at::TensorList(inputs), at::TensorList(parameters), state);
}

}  // namespace atl::runtime
