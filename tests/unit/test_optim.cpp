// The inner optimizer pieces: flat AdamW against torch::optim::AdamW, and the LR schedules' shape.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "parallel/flat_parameters.h"

using atl::optim::LrDecay;
using atl::optim::LrSchedule;

TEST(FlatAdamW, MatchesTorchAdamWBitwiseWithDecayAndNoDecayGroups) {
  torch::manual_seed(0);
  atl::parallel::FlatParameters flat(
      {{"w1", {16, 8}, true}, {"norm", {8}, false}, {"w2", {5, 16}, true}, {"norm2", {16}, false}},
      at::kFloat);
  std::vector<torch::Tensor> decay, no_decay;
  std::vector<atl::optim::DecaySegment> segments;
  for (const auto& e : flat.entries()) {
    at::NoGradGuard no_grad;
    e.value.copy_(torch::randn(e.info.shape));
    torch::Tensor p = e.value.detach().clone().requires_grad_(true);
    (e.info.weight_decay ? decay : no_decay).push_back(p);
    if (e.info.weight_decay) segments.push_back({e.offset, e.numel});
  }
  const double lr = 3e-3, wd = 0.1;
  // Two value segments (as ZeRO hands over one piece per bucket) over one gradient buffer.
  const int64_t cut = flat.entries()[2].offset;
  atl::optim::FlatAdamW ours(
      {flat.values().narrow(0, 0, cut), flat.values().narrow(0, cut, flat.numel() - cut)}, flat.grads(),
      segments, {0.9, 0.95, 1e-8, wd});
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay,
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd)));
  groups.emplace_back(no_decay,
                      std::make_unique<torch::optim::AdamWOptions>(
                          torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.0)));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(lr));

  for (int step = 0; step < 10; ++step) {
    size_t di = 0, ni = 0;
    for (const auto& e : flat.entries()) {
      torch::Tensor g = torch::randn(e.info.shape);
      e.grad.copy_(g);
      torch::Tensor& p = e.info.weight_decay ? decay[di++] : no_decay[ni++];
      p.mutable_grad() = g.clone();
    }
    ours.step(lr);
    reference.step();
  }
  size_t di = 0, ni = 0;
  for (const auto& e : flat.entries()) {
    const torch::Tensor& p = e.info.weight_decay ? decay[di++] : no_decay[ni++];
    EXPECT_TRUE(e.value.detach().equal(p.detach()))
        << e.info.name << " max diff " << (e.value - p).abs().max().item<double>();
  }
  EXPECT_EQ(ours.steps_taken(), 10);
}

// optim.fused: ATen's one-pass kernel computes the same update (rounded differently), and applies weight
// decay exactly where the decay segments say, also where a segment is cut between two value pieces.
TEST(FlatAdamW, FusedKernelMatchesTheComposedUpdateWithDecayOnlyWhereMarked) {
  torch::manual_seed(1);
  auto make_flat = [] {
    return atl::parallel::FlatParameters(
        {{"w1", {16, 8}, true}, {"norm", {8}, false}, {"w2", {5, 16}, true}, {"norm2", {16}, false}},
        at::kFloat);
  };
  atl::parallel::FlatParameters composed_flat = make_flat(), fused_flat = make_flat();
  std::vector<atl::optim::DecaySegment> segments;
  for (const auto& e : composed_flat.entries())
    if (e.info.weight_decay) segments.push_back({e.offset, e.numel});
  {
    at::NoGradGuard no_grad;
    composed_flat.values().copy_(torch::randn({composed_flat.numel()}));
    fused_flat.values().copy_(composed_flat.values());
  }
  // Value pieces cut inside w1 (a decay segment split in two) and at norm2.
  const int64_t cut1 = 50, cut2 = composed_flat.entries()[3].offset;
  auto pieces = [&](atl::parallel::FlatParameters& flat) {
    return std::vector<at::Tensor>{flat.values().narrow(0, 0, cut1),
                                   flat.values().narrow(0, cut1, cut2 - cut1),
                                   flat.values().narrow(0, cut2, flat.numel() - cut2)};
  };
  const double wd = 0.5;  // large, so decay in the wrong place would show far above rounding
  atl::optim::FlatAdamW composed(pieces(composed_flat), composed_flat.grads(), segments,
                                 {0.9, 0.95, 1e-8, wd});
  atl::optim::FlatAdamW fused(pieces(fused_flat), fused_flat.grads(), segments, {0.9, 0.95, 1e-8, wd, true});
  for (int step = 0; step < 10; ++step) {
    composed_flat.grads().copy_(torch::randn({composed_flat.numel()}));
    fused_flat.grads().copy_(composed_flat.grads());
    composed.step(3e-3);
    fused.step(3e-3);
  }
  EXPECT_EQ(fused.steps_taken(), 10);
  for (size_t i = 0; i < composed_flat.entries().size(); ++i) {
    const at::Tensor a = composed_flat.entries()[i].value, b = fused_flat.entries()[i].value;
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-6) << composed_flat.entries()[i].info.name;
  }
  EXPECT_LT((composed.exp_avg_sq() - fused.exp_avg_sq()).abs().max().item<double>(), 1e-7);
}

TEST(LrSchedule, LinearWarmupThenCosineToMinLr) {
  const LrSchedule s{1.0, 0.1, 10, 110, LrDecay::kCosine};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);             // decay starts at the peak
  EXPECT_NEAR(s.at(10 + 99 / 2), 0.55, 0.01);  // halfway: midpoint of lr and min_lr
  EXPECT_DOUBLE_EQ(s.at(109), 0.1);            // last step reaches min_lr
  for (int64_t t = 10; t < 109; ++t) EXPECT_GE(s.at(t), s.at(t + 1)) << "monotone decay at " << t;
}

TEST(LrSchedule, ConstantAndWarmupStableDecay) {
  const LrSchedule constant{1.0, 0.1, 5, 100, LrDecay::kConstant};
  EXPECT_DOUBLE_EQ(constant.at(2), 0.6);
  EXPECT_DOUBLE_EQ(constant.at(99), 1.0);
  const LrSchedule wsd{1.0, 0.0, 0, 101, LrDecay::kWsd};
  EXPECT_DOUBLE_EQ(wsd.at(50), 1.0);  // stable phase
  EXPECT_DOUBLE_EQ(wsd.at(80), 1.0);  // decay starts after 80% of the steps
  EXPECT_NEAR(wsd.at(90), 0.5, 1e-12);
  EXPECT_NEAR(wsd.at(100), 0.0, 1e-12);
}
