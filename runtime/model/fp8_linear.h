// A linear layer whose three matrix products run in FP8 (train.precision fp8): the forward
// y = x W^T, the input gradient dx = dy W and the weight gradient dW = dy^T x, each from FP8
// operands with dynamic scaling (fp8_tensor.h) through at::_scaled_mm, accumulated in fp32 and
// written in the compute dtype (bf16). Only the products change: the parameters, their fp32 master
// copies, and everything around the layer keep their precision.
//
// Formats: weights and activations E4M3 (3 mantissa bits, the precision the forward needs). The
// gradient dy: E5M2 under tensorwise scaling, E4M3 under rowwise -- as torchao's recipes have it
// ("tensorwise": E5M2 gradients, as TransformerEngine's default "hybrid" format; "rowwise": E4M3
// for all three). One scale must cover a whole gradient tensor's range, and gradients carry rare
// large elements over a bulk orders of magnitude smaller: E4M3 scaled to the largest keeps only about
// 19 binades below it (15 of them normal), E5M2 about 33 (30 normal), so the bulk of a gradient keeps
// its values where E4M3 would flush or coarsen them. A scale per row narrows the
// range each scale covers, and E4M3's extra mantissa bit halves every element's rounding error.
// Both are the default of a recipe, not a rule: Fp8Recipe::gradient_format chooses either.
//
// The operands each product needs, for x = [tokens, in] and W = [out, in] (every operand row-major
// with the contraction dimension innermost, as cuBLASLt's FP8 kernels on Hopper take them):
//   forward  y  [tokens, out] = x [tokens, in]  . W   [out, in]^T
//   input    dx [tokens, in]  = dy [tokens, out] . W^T [in, out]^T
//   weight   dW [out, in]     = dy^T [out, tokens] . x^T [in, tokens]^T
// Tensorwise, a transpose is the quantized tensor's bytes transposed (one scale), so x is quantized
// once in the forward and kept for backward as FP8 (a byte an element, where at::linear keeps its
// bf16 x), and dy once in the backward. Rowwise, the scales run along the rows, so a transposed
// operand is quantized again from the high-precision tensor (x is kept in its own dtype).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/model/fp8_tensor.h"

namespace atl::runtime {

struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::kTensorwise;
  Fp8Format gradient_format = Fp8Format::kE5M2;  // dy's format; x and W are always E4M3
  // at::_scaled_mm's use_fast_accum for the forward product; the two gradient products never take
  // it (torchao's defaults: the forward tolerates the accumulator's shorter mantissa, gradients
  // summed over all tokens of a microbatch less so).
  bool fast_accumulation_forward = true;
  Fp8Backend backend = Fp8Backend::kAuto;

  // The recipe of a scaling with its default gradient format (above).
  static Fp8Recipe with_scaling(Fp8Scaling scaling);
};

// Each weight quantized once a step: the forward operand W (and, when a backward will need it, the
// input-gradient operand W^T) made on first use and handed to every microbatch's forward and
// backward until start_step. A weight is known by its storage (a ZeRO-3 release and re-gather keeps
// the storage object), offset, sizes and strides, and its autograd version: an in-place update of
// the weight (the optimizer's) makes the entry stale even before start_step; a collective writing
// it (ZeRO's gathers: MPI and NCCL write behind autograd's back, and a version bump there would
// invalidate every tensor backward saved from the same flat buffer) needs start_step. Holds two bytes per cached parameter (W and W^T in
// FP8); an entry whose weight's storage was freed (a unit ZeRO-3 released) is dropped at the next
// quantization, so under ZeRO-3 the cache holds about the units gathered. Thread-safe: autograd runs a
// GPU's backward on a thread of its own.
class Fp8WeightCache {
 public:
  explicit Fp8WeightCache(Fp8Scaling scaling);
  Fp8Scaling scaling() const { return scaling_; }
  // Forgets every entry: call when the weights may have changed without autograd seeing it (a new
  // step: the optimizer, a collective writing the parameters, a checkpoint load).
  void start_step();
  // W = [out, in] quantized along `in` (the forward's second operand).
  Fp8Tensor forward_operand(const at::Tensor& weight);
  // W^T = [in, out] quantized along `out` (the input gradient's second operand).
  Fp8Tensor input_gradient_operand(const at::Tensor& weight);
  // How many times a weight was quantized, and W^T operands made (tests and diagnostics).
  int64_t quantizations() const;
  int64_t transposes() const;
  size_t entries() const;

 private:
  struct Entry {
    at::Tensor weight;  // keeps the storage, so its address names no other tensor while cached
    int64_t version = 0;
    Fp8Tensor forward, input_gradient;
  };
  using Key = std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, int>;
  Entry& entry_for(const at::Tensor& weight);  // under mutex_

  Fp8Scaling scaling_;
  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
  int64_t quantizations_ = 0, transposes_ = 0;
};

// x W^T for x = [..., in] and W = [out, in] with its three products in FP8 (the recipe above), in
// x's dtype; W's gradient in W's dtype. `cache`: where W's FP8 operands come from (null: quantized
// at each use); its scaling must be the recipe's. `product`: the forward's result where the caller
// already has it (a recomputed region's kept output, recompute.h): returned as it is, the backward
// unchanged.
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& weight, const Fp8Recipe& recipe = {},
                      Fp8WeightCache* cache = nullptr, const at::Tensor& product = {});

// The FP8 linear layers of a rank's model chunks (train.precision fp8): the recipe and one weight
// cache all chunks share. start_step before each pass over the model whose weights may have changed
// since the last: each training step's microbatches, each evaluation.
class Fp8Linears {
 public:
  explicit Fp8Linears(const Fp8Recipe& recipe) : recipe_(recipe), cache_(recipe.scaling) {}
  // fp8_linear with this recipe and cache.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& product = {}) {
    return fp8_linear(x, weight, recipe_, &cache_, product);
  }
  void start_step() { cache_.start_step(); }
  const Fp8Recipe& recipe() const { return recipe_; }
  const Fp8WeightCache& cache() const { return cache_; }

 private:
  Fp8Recipe recipe_;
  Fp8WeightCache cache_;
};

}  // namespace atl::runtime
