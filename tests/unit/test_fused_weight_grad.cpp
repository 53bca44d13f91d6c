// kernels.fused_weight_grad: a linear layer's backward hands dy and x to the data-parallel engine
// (a WeightGradientSink), which writes dW = dy^T x into the flat gradient buffer with the product
// itself. The buffer must hold what autograd's gradient would have put there -- bit for bit where
// the dtypes agree, the unrounded fp32 product under mixed precision -- and a recomputed layer, whose
// rerun lands the weight while autograd hands the parameter an undefined gradient, must count that
// parameter's arrival once, or its bucket is reduced before the step's gradients are all in.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "comm/single_rank_communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/sharded_data_parallel.h"
#include "runtime/model/recompute.h"
#include "runtime/model/sink_linear.h"

namespace atl::parallel {
namespace {

using runtime::Product;

// Two replicas holding the same gradients, seen from one of them: an average over the group is the
// tensor itself, so a stage-0 engine over it counts arrivals and launches its reductions (over a group
// of one it would not) with the results of one rank. Each all-reduce's input is kept as it is at the
// launch: what the engine reduced, and when.
class TwoReplicas final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& name() const override { return self_.name(); }
  comm::WorkPtr all_reduce(const at::Tensor& tensor, comm::ReduceOp op) override {
    reduced.push_back(tensor.clone());
    return self_.all_reduce(tensor, op);
  }
  comm::WorkPtr reduce_scatter(const at::Tensor&, const at::Tensor&, comm::ReduceOp) override {
    return unused();
  }
  comm::WorkPtr all_gather(const at::Tensor&, const at::Tensor&) override { return unused(); }
  comm::WorkPtr broadcast(const at::Tensor&, int) override { return unused(); }
  comm::WorkPtr batch_p2p(const std::vector<comm::P2POp>&) override { return unused(); }
  void barrier() override {}

  std::vector<at::Tensor> reduced;

 private:
  static comm::WorkPtr unused() { throw std::logic_error("TwoReplicas: only all_reduce (ZeRO-0)"); }
  comm::SingleRankCommunicator self_{"dp"};
};

struct Setup {
  at::ScalarType dtype = at::kFloat;
  int zero_stage = 0;
  bool fused = true;  // the weight's gradient through the sink; else through autograd
  bool recompute = false;
};

// w [4, 3] and a norm-like n [3]; y = (x * n) W^T, two backwards (microbatches) a step, each
// against its own upstream gradient. Returns what the optimizer reads: the engine's gradients.
// ZeRO-0 runs over TwoReplicas, whose launches land in `reduced` where given.
at::Tensor gradients_of_one_step(const Setup& s, std::vector<at::Tensor>* reduced = nullptr) {
  FlatParameters flat({{"w", {4, 3}}, {"n", {3}}}, s.dtype, zero_layout(s.zero_stage, 1, 1 << 20, 4),
                      at::kFloat);
  {
    at::NoGradGuard no_grad;
    flat.values().copy_(at::linspace(-1, 1, flat.numel(), at::kFloat));
  }
  comm::SingleRankCommunicator self("dp");
  TwoReplicas replicas;
  comm::Communicator& group = s.zero_stage == 0 ? static_cast<comm::Communicator&>(replicas) : self;
  ShardedDataParallel engine(flat, group, s.zero_stage, at::ScalarType::Undefined, /*first_grad_copy=*/true,
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
    engine.start_backward();
    y.backward(dy);
  }
  engine.finish();
  if (reduced) *reduced = replicas.reduced;
  return engine.optimizer_grads().clone();
}

TEST(FusedWeightGrad, LandsAutogradsGradientBitForBit) {
  for (const int zero_stage : {0, 1}) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE("ZeRO-" + std::to_string(zero_stage) + (recompute ? " recomputed" : ""));
      std::vector<at::Tensor> reduced_autograd, reduced_sink;
      const at::Tensor through_autograd =
          gradients_of_one_step({at::kFloat, zero_stage, false, recompute}, &reduced_autograd);
      const at::Tensor through_sink =
          gradients_of_one_step({at::kFloat, zero_stage, true, recompute}, &reduced_sink);
      EXPECT_TRUE(through_sink.equal(through_autograd))
          << "max difference " << (through_sink - through_autograd).abs().max().item<double>();
      EXPECT_FALSE(through_sink.narrow(0, 0, 12).eq(0).all().item<bool>());
      if (zero_stage != 0) continue;
      // The one bucket is reduced once, when both parameters' gradients of both microbatches have
      // landed (from the backward hooks' count): not before, nor again in finish().
      for (const auto& [reduced, grads] :
           {std::pair{&reduced_autograd, &through_autograd}, std::pair{&reduced_sink, &through_sink}}) {
        ASSERT_EQ(reduced->size(), 1u);
        EXPECT_TRUE(reduced->front().equal(*grads));
      }
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

// W lands through the sink once in each backward of the first step, which the engine learns; then
// y = tanh(x W^T) n W^T lands it twice, with n landing between: n's landing completes the bucket,
// which ZeRO 0-1 reduce once a step, so W's second gradient would miss the reduction. The engine
// refuses it, naming the parameter.
TEST(FusedWeightGrad, ALandingBeyondTheLearnedCountAfterItsBucketWasReducedIsRefused) {
  for (const int zero_stage : {0, 1}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(zero_stage));
    FlatParameters flat({{"w", {3, 3}}, {"n", {3}}}, at::kFloat, zero_layout(zero_stage, 1, 1 << 20, 4));
    {
      at::NoGradGuard no_grad;
      flat.values().copy_(at::linspace(-1, 1, flat.numel(), at::kFloat));
    }
    comm::SingleRankCommunicator self("dp");
    TwoReplicas replicas;
    comm::Communicator& group = zero_stage == 0 ? static_cast<comm::Communicator&>(replicas) : self;
    ShardedDataParallel engine(flat, group, zero_stage, at::ScalarType::Undefined, true, true);
    const at::Tensor w = flat.entry("w").value, n = flat.entry("n").value;
    const at::Tensor x = torch::randn({2, 3}).requires_grad_();
    const auto through_w = [&](const at::Tensor& in) {
      return runtime::linear_through(nullptr, in, w, Product::kRereadInBackward, &engine);
    };
    engine.start_step(1);
    engine.start_backward();
    through_w(x * n).sum().backward();
    engine.finish();
    engine.start_step(1);
    engine.start_backward();
    const at::Tensor y = through_w(at::tanh(through_w(x)) * n);
    try {
      y.sum().backward();
      ADD_FAILURE() << "a gradient of w landed after its bucket was reduced, unrefused";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("a gradient of w landed after its bucket was reduced"),
                std::string::npos)
          << e.what();
    }
  }
}

// A gradient landing while no backward was announced (start_backward) is refused: the engine counts
// arrivals per backward and could not tell two microbatches' landings from one's two.
TEST(FusedWeightGrad, ALandingOutsideAnAnnouncedBackwardIsRefused) {
  FlatParameters flat({{"w", {3, 3}}}, at::kFloat, zero_layout(1, 1, 1 << 20, 4));
  comm::SingleRankCommunicator self("dp");
  ShardedDataParallel engine(flat, self, 1, at::ScalarType::Undefined, true, true);
  const at::Tensor x = torch::randn({2, 3}).requires_grad_();
  engine.start_step(1);
  const at::Tensor y =
      runtime::linear_through(nullptr, x, flat.entry("w").value, Product::kRereadInBackward, &engine);
  try {
    y.sum().backward();
    ADD_FAILURE() << "a landing before start_backward, unrefused";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("landed before start_backward"), std::string::npos) << e.what();
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
