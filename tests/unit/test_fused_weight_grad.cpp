// kernels.fused_weight_grad: a linear layer's backward hands dy and x to the data-parallel engine
// (a WeightGradientSink), which writes dW = dy^T x into the flat gradient buffer with the product
// itself. The buffer must hold what autograd's gradient would have put there -- bit for bit where
// the dtypes agree, the unrounded fp32 product under mixed precision -- and a recomputed layer, whose
// rerun lands the weight while autograd hands the parameter an undefined gradient, must count that
// parameter's arrival once, or its bucket is reduced before the step's gradients are all in.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "comm/single_rank_communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/sharded_data_parallel.h"
#include "runtime/model/recompute.h"
#include "runtime/model/sink_linear.h"

namespace atl::parallel {
namespace {

using runtime::Product;

struct Setup {
  at::ScalarType dtype = at::kFloat;
  int zero_stage = 0;
  bool fused = true;  // the weight's gradient through the sink; else through autograd
  bool recompute = false;
};

// w [4, 3] and a norm-like n [3]; y = (x * n) W^T, two backwards (microbatches) a step, each
// against its own upstream gradient. Returns what the optimizer reads: the engine's gradients.
at::Tensor gradients_of_one_step(const Setup& s) {
  FlatParameters flat({{"w", {4, 3}}, {"n", {3}}}, s.dtype, zero_layout(s.zero_stage, 1, 1 << 20, 4),
                      at::kFloat);
  {
    at::NoGradGuard no_grad;
    flat.values().copy_(at::linspace(-1, 1, flat.numel(), at::kFloat));
  }
  comm::SingleRankCommunicator self("dp");
  ShardedDataParallel engine(flat, self, s.zero_stage, at::ScalarType::Undefined, /*first_grad_copy=*/true,
                             /*fused_weight_gradients=*/s.fused);
  const at::Tensor w = flat.entry("w").value, n = flat.entry("n").value;
  WeightGradientSink* sink = s.fused ? &engine : nullptr;
  const runtime::Region layer = [sink](const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& p,
                                       runtime::LinearTape* tape) {
    return std::vector<at::Tensor>{
        runtime::linear_through(tape, in[0] * p[1], p[0], Product::kRereadInBackward, sink)};
  };
  torch::manual_seed(5);
  engine.start_step(2);
  for (int microbatch = 0; microbatch < 2; ++microbatch) {
    const at::Tensor x = torch::randn({2, 5, 3}).to(s.dtype).requires_grad_();
    const at::Tensor dy = torch::randn({2, 5, 4}).to(s.dtype);
    const at::Tensor y =
        s.recompute ? runtime::run_recomputed(layer, {x}, {w, n}, false)[0] : layer({x}, {w, n}, nullptr)[0];
    y.backward(dy);
  }
  engine.finish();
  return engine.optimizer_grads().clone();
}

TEST(FusedWeightGrad, LandsAutogradsGradientBitForBit) {
  for (const int zero_stage : {0, 1}) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(zero_stage) + (recompute ? " recomputed" : ""));
      const at::Tensor through_autograd = gradients_of_one_step({at::kFloat, zero_stage, false, recompute});
      const at::Tensor through_sink = gradients_of_one_step({at::kFloat, zero_stage, true, recompute});
      EXPECT_TRUE(through_sink.equal(through_autograd))
          << "max difference " << (through_sink - through_autograd).abs().max().item<double>();
      EXPECT_FALSE(through_sink.narrow(0, 0, 12).eq(0).all().item<bool>());
    }
  }
}

// Under bf16 compute with an fp32 buffer the product lands unrounded: within bf16's rounding of
// autograd's, and not equal to it.
TEST(FusedWeightGrad, Bf16ProductsLandInFp32Unrounded) {
  for (const bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recomputed" : "plain");
    const at::Tensor rounded = gradients_of_one_step({at::kBFloat16, 1, false, recompute});
    const at::Tensor unrounded = gradients_of_one_step({at::kBFloat16, 1, true, recompute});
    const at::Tensor w_rounded = rounded.narrow(0, 0, 12), w_unrounded = unrounded.narrow(0, 0, 12);
    EXPECT_FALSE(w_unrounded.equal(w_rounded));
    EXPECT_LT((w_unrounded - w_rounded).abs().max().item<double>(),
              2e-2 * w_rounded.abs().max().item<double>());
    EXPECT_TRUE(unrounded.narrow(0, 16, 3).equal(rounded.narrow(0, 16, 3))) << "n goes through autograd";
  }
}

TEST(FusedWeightGrad, TheEngineReceivesTwoDimensionalParametersAndTheirAliasesOnly) {
  FlatParameters flat({{"w", {4, 3}}, {"n", {3}}}, at::kFloat);
  comm::SingleRankCommunicator self("dp");
  ShardedDataParallel engine(flat, self, 0, at::ScalarType::Undefined, true, true);
  EXPECT_TRUE(engine.receives(flat.entry("w").value));
  EXPECT_TRUE(engine.receives(flat.entry("w").value.detach()));
  EXPECT_FALSE(engine.receives(flat.entry("n").value));
  EXPECT_FALSE(engine.receives(torch::zeros({4, 3})));
  ShardedDataParallel without(flat, self, 0, at::ScalarType::Undefined, true, false);
  EXPECT_FALSE(without.receives(flat.entry("w").value));
}

TEST(FusedWeightGrad, NeedsFirstGradCopy) {
  FlatParameters flat({{"w", {4, 3}}}, at::kFloat);
  comm::SingleRankCommunicator self("dp");
  EXPECT_THROW(ShardedDataParallel(flat, self, 0, at::ScalarType::Undefined, false, true),
               std::invalid_argument);
}

}  // namespace
}  // namespace atl::parallel
