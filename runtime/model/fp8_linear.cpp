#include "runtime/model/fp8_linear.h"

#include <torch/torch.h>

#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace atl::runtime {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr Fp8Format kOperands = Fp8Format::kE4M3;  // weights and activations

// W^T = [in, out] quantized along `out`: tensorwise the forward operand's bytes transposed, rowwise
// quantized again (its rows are W's columns).
Fp8Tensor weight_transpose_operand(const at::Tensor& weight, Fp8Scaling scaling, const Fp8Tensor* forward) {
  if (scaling == Fp8Scaling::kTensorwise)
    return transposed(forward ? *forward : quantize(weight.contiguous(), kOperands, scaling));
  return quantize(weight.t().contiguous(), kOperands, scaling);
}

// Contexts keep IValues: the recipe as integers.
void save_recipe(AutogradContext* ctx, const Fp8Recipe& recipe) {
  ctx->saved_data["scaling"] = static_cast<int64_t>(recipe.scaling);
  ctx->saved_data["gradient_format"] = static_cast<int64_t>(recipe.gradient_format);
  ctx->saved_data["backend"] = static_cast<int64_t>(recipe.backend);
}

Fp8Recipe saved_recipe(AutogradContext* ctx) {
  Fp8Recipe recipe;
  recipe.scaling = static_cast<Fp8Scaling>(ctx->saved_data["scaling"].toInt());
  recipe.gradient_format = static_cast<Fp8Format>(ctx->saved_data["gradient_format"].toInt());
  recipe.backend = static_cast<Fp8Backend>(ctx->saved_data["backend"].toInt());
  return recipe;
}

// Saved for backward: x as its product with dy needs it (tensorwise the forward's FP8 x and its
// scale, rowwise x itself), W, and W^T's operand where the cache made it in the forward.
enum Saved { kX, kXScale, kWeight, kWeightTData, kWeightTScale };

class Fp8Linear : public torch::autograd::Function<Fp8Linear> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& product, const Fp8Recipe& recipe,
                            Fp8WeightCache* cache, bool records) {
    const int64_t in = weight.size(1);
    const bool given = product.has_value() && product->defined();
    const at::Tensor x_rows = x.reshape({-1, in}).contiguous();
    const bool tensorwise = recipe.scaling == Fp8Scaling::kTensorwise;
    Fp8Tensor xq;
    if (!given || (records && tensorwise)) xq = quantize(x_rows, kOperands, recipe.scaling);
    at::Tensor y;
    if (given) {
      y = product->view_as(*product);
    } else {
      const Fp8Tensor wq =
          cache ? cache->forward_operand(weight) : quantize(weight.contiguous(), kOperands, recipe.scaling);
      std::vector<int64_t> shape = x.sizes().vec();
      shape.back() = weight.size(0);
      y = fp8_mm(xq, wq, x.scalar_type(), recipe.fast_accumulation_forward, recipe.backend).view(shape);
    }
    if (records) {
      Fp8Tensor wt;
      if (cache && x.requires_grad()) wt = cache->input_gradient_operand(weight);
      ctx->save_for_backward({tensorwise ? xq.data : x_rows, tensorwise ? xq.inverse_scale : at::Tensor(),
                              weight, wt.data, wt.inverse_scale});
      save_recipe(ctx, recipe);
      ctx->saved_data["x_sizes"] = x.sizes().vec();
      ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    }
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list result(6);  // x, weight, product; then the recipe, the cache and `records`
    if (!grads[0].defined()) return result;
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[kWeight];
    const Fp8Recipe recipe = saved_recipe(ctx);
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const std::vector<int64_t> x_sizes = ctx->saved_data["x_sizes"].toIntVector();
    const at::Tensor dy_rows = grads[0].reshape({-1, weight.size(0)}).contiguous();
    const bool tensorwise = recipe.scaling == Fp8Scaling::kTensorwise;
    const bool needs_dx = ctx->needs_input_grad(0), needs_dw = ctx->needs_input_grad(1);
    // dy along `out` for dx; tensorwise its transpose serves dW as well.
    Fp8Tensor dyq;
    if (needs_dx || (needs_dw && tensorwise)) dyq = quantize(dy_rows, recipe.gradient_format, recipe.scaling);
    if (needs_dx) {
      const Fp8Tensor wt = saved[kWeightTData].defined()
                               ? Fp8Tensor{saved[kWeightTData], saved[kWeightTScale]}
                               : weight_transpose_operand(weight, recipe.scaling, nullptr);
      result[0] = fp8_mm(dyq, wt, x_dtype, /*fast_accumulation=*/false, recipe.backend).view(x_sizes);
    }
    if (needs_dw) {
      // dW = dy^T x: both operands along the tokens.
      const Fp8Tensor dy_t = tensorwise
                                 ? transposed(dyq)
                                 : quantize(dy_rows.t().contiguous(), recipe.gradient_format, recipe.scaling);
      const Fp8Tensor x_t = tensorwise ? transposed(Fp8Tensor{saved[kX], saved[kXScale]})
                                       : quantize(saved[kX].t().contiguous(), kOperands, recipe.scaling);
      result[1] = fp8_mm(dy_t, x_t, weight.scalar_type(), /*fast_accumulation=*/false, recipe.backend);
    }
    return result;
  }
};

}  // namespace

Fp8Recipe Fp8Recipe::with_scaling(Fp8Scaling scaling) {
  Fp8Recipe recipe;
  recipe.scaling = scaling;
  recipe.gradient_format = scaling == Fp8Scaling::kTensorwise ? Fp8Format::kE5M2 : Fp8Format::kE4M3;
  return recipe;
}

Fp8WeightCache::Fp8WeightCache(Fp8Scaling scaling) : scaling_(scaling) {}

void Fp8WeightCache::start_step() {
  const std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

Fp8WeightCache::Entry& Fp8WeightCache::entry_for(const at::Tensor& weight) {
  Key key{weight.storage().unsafeGetStorageImpl(), weight.storage_offset(), weight.sizes().vec(),
          weight.strides().vec(), static_cast<int>(weight.scalar_type())};
  // Inference tensors have no version counter (and nothing updates them in place under autograd).
  const int64_t version = weight.is_inference() ? 0 : weight._version();
  const auto found = entries_.find(key);
  if (found != entries_.end() && found->second.version == version) return found->second;
  // Entries follow their weights' residency: a weight ZeRO-3 released (its storage emptied) takes
  // its FP8 operands with it, so that the cache holds about the units gathered, not the whole model.
  std::erase_if(entries_, [](const auto& item) { return item.second.weight.storage().nbytes() == 0; });
  const at::NoGradGuard no_grad;  // the operands belong to no graph
  Entry entry{weight, version, quantize(weight.contiguous(), kOperands, scaling_), {}};
  ++quantizations_;
  return entries_.insert_or_assign(std::move(key), std::move(entry)).first->second;
}

Fp8Tensor Fp8WeightCache::forward_operand(const at::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entry_for(weight).forward;
}

Fp8Tensor Fp8WeightCache::input_gradient_operand(const at::Tensor& weight) {
  const std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = entry_for(weight);
  if (!entry.input_gradient.data.defined()) {
    const at::NoGradGuard no_grad;
    entry.input_gradient = weight_transpose_operand(weight, scaling_, &entry.forward);
    ++transposes_;
  }
  return entry.input_gradient;
}

int64_t Fp8WeightCache::quantizations() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return quantizations_;
}

int64_t Fp8WeightCache::transposes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return transposes_;
}

size_t Fp8WeightCache::entries() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const Fp8Recipe& recipe,
                      Fp8WeightCache* cache, const at::Tensor& product) {
  if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1))
    throw std::invalid_argument("fp8_linear: needs x [..., in] and a weight [out, in] of the same in");
  if (cache && cache->scaling() != recipe.scaling)
    throw std::invalid_argument(
        "fp8_linear: the weight cache quantizes with another scaling than the recipe's");
  const bool records = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  const std::optional<at::Tensor> given =
      product.defined() ? std::optional<at::Tensor>(product) : std::nullopt;
  return Fp8Linear::apply(x, weight, given, recipe, cache, records);
}

}  // namespace atl::runtime
