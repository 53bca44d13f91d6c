// kernels.first_grad_copy: the data-parallel engine lands each parameter's gradients itself -- the
// step's first by a copy into the flat buffer, later ones by adds -- instead of zeroing the buffer
// for autograd to add into. The buffer must end each step holding exactly what the zeroed path
// holds: the sum of the step's gradients, and zeros for a parameter the step did not use (not last
// step's gradient); and the parameters get their flat .grad back when the engine goes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "comm/single_rank_communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/sharded_data_parallel.h"

namespace atl::parallel {
namespace {

// Each step's backwards: per backward, the factors of a and b (an undefined one: b unused).
using Backwards = std::vector<std::pair<at::Tensor, at::Tensor>>;

// The flat gradient buffer after each step of `steps`, trained on a fresh engine.
std::vector<at::Tensor> gradients_after_each_step(at::ScalarType dtype, bool first_grad_copy,
                                                  const std::vector<Backwards>& steps) {
  FlatParameters flat({{"a", {3}}, {"b", {2}}}, dtype, {}, at::kFloat);
  {
    at::NoGradGuard no_grad;
    flat.values().copy_(at::arange(1, flat.numel() + 1, at::kFloat));
  }
  comm::SingleRankCommunicator self("dp");
  ShardedDataParallel engine(flat, self, /*zero_stage=*/0, at::ScalarType::Undefined, first_grad_copy);
  const at::Tensor a = flat.entry("a").value, b = flat.entry("b").value;
  std::vector<at::Tensor> after;
  for (const Backwards& backwards : steps) {
    engine.start_step(static_cast<int>(backwards.size()));
    for (const auto& [x, y] : backwards) {
      engine.start_backward();
      at::Tensor loss = (a * x.to(dtype)).sum();
      if (y.defined()) loss = loss + (b * y.to(dtype)).sum();
      loss.backward();
    }
    engine.finish();
    after.push_back(flat.grads().clone());
  }
  return after;
}

TEST(FirstGradCopy, LandsTheSameSumsAsTheZeroedBufferAndZerosAnUnusedParameter) {
  torch::manual_seed(3);
  const auto r = [](int64_t n) { return torch::randn({n}); };
  const std::vector<Backwards> steps{
      {{r(3), r(2)}, {r(3), r(2)}, {r(3), r(2)}},  // accumulation over three microbatches
      {{r(3), at::Tensor()}},                      // b unused: its gradient is zero, not step 1's
      {{r(3), r(2)}},
  };
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const std::vector<at::Tensor> zeroed = gradients_after_each_step(dtype, false, steps);
    const std::vector<at::Tensor> copied = gradients_after_each_step(dtype, true, steps);
    for (size_t s = 0; s < steps.size(); ++s) EXPECT_TRUE(copied[s].equal(zeroed[s])) << "step " << s + 1;
    EXPECT_TRUE(copied[1].narrow(0, 3, 2).eq(0).all().item<bool>()) << "the unused parameter's gradient";
    EXPECT_FALSE(copied[0].narrow(0, 3, 2).eq(0).all().item<bool>());
  }
}

TEST(FirstGradCopy, TheParametersGetTheirFlatGradientBackWhenTheEngineGoes) {
  FlatParameters flat({{"a", {3}}}, at::kFloat);
  const FlatEntry& a = flat.entry("a");
  comm::SingleRankCommunicator self("dp");
  {
    ShardedDataParallel engine(flat, self, 0, at::ScalarType::Undefined, /*first_grad_copy=*/true);
    EXPECT_FALSE(a.value.grad().defined());  // autograd hands its gradients to the engine
  }
  EXPECT_TRUE(a.value.grad().is_same(a.grad));
}

// x * 2 in forward; in backward x's gradient and an undefined one for u, which u's AccumulateGrad
// still calls the engine's hook with (LibTorch 2.14).
class IgnoresItsParameter : public torch::autograd::Function<IgnoresItsParameter> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, const at::Tensor&) {
    return x * 2;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return {grads[0] * 2, at::Tensor()};
  }
};

// A hook call with an undefined gradient is no arrival: counted as one, u's bucket would be reduced
// (ZeRO-1: copied into the shard) still holding step 1's gradient, before finish() zeros it.
TEST(FirstGradCopy, AnUndefinedGradientIsNoArrival) {
  FlatParameters flat({{"u", {4}}}, at::kFloat, zero_layout(1, 1, 1 << 20, 4));
  comm::SingleRankCommunicator self("dp");
  ShardedDataParallel engine(flat, self, 1, at::ScalarType::Undefined, /*first_grad_copy=*/true);
  const at::Tensor u = flat.entry("u").value;
  const at::Tensor x = torch::ones({4}).requires_grad_();
  engine.start_step(1);
  engine.start_backward();
  (x * u).sum().backward();
  engine.finish();
  EXPECT_TRUE(engine.optimizer_grads().narrow(0, 0, 4).equal(torch::ones({4})));  // then padding
  engine.start_step(1);
  engine.start_backward();
  IgnoresItsParameter::apply(x, u).sum().backward();
  engine.finish();
  EXPECT_TRUE(engine.optimizer_grads().eq(0).all().item<bool>()) << engine.optimizer_grads();
}

TEST(FirstGradCopy, IsForZeroStagesZeroAndOne) {
  FlatParameters flat({{"a", {4}}}, at::kFloat, zero_layout(2, 1, 1 << 20, 4));
  comm::SingleRankCommunicator self("dp");
  EXPECT_THROW(ShardedDataParallel(flat, self, 2, at::ScalarType::Undefined, true), std::invalid_argument);
}

}  // namespace
}  // namespace atl::parallel
