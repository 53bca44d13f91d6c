// The outer optimizers' rules and schedules against their closed forms (DESIGN §6).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <set>

#include "optim/outer/outer_rules.h"
#include "optim/outer/outer_schedule.h"
#include "optim/outer/simulated_link.h"

namespace atl::optim::outer {
namespace {

at::Tensor values(std::vector<float> v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kFloat));
}

TEST(OuterRules, NesterovClosedFormForAConstantDelta) {
  at::Tensor phi = values({0.0f}), momentum = values({0.0f});
  const at::Tensor delta = values({1.0f});
  const OuterSgdOptions nesterov{0.7, 0.9, true};
  outer_sgd_step(phi, momentum, delta, nesterov);
  EXPECT_NEAR(phi.item<float>(), -0.7 * (1 + 0.9), 1e-6);  // 1.33
  outer_sgd_step(phi, momentum, delta, nesterov);
  // b = 0.9*1 + 1 = 1.9; step = 0.7*(1 + 0.9*1.9) = 1.897
  EXPECT_NEAR(phi.item<float>(), -1.33 - 1.897, 1e-6);
  EXPECT_NEAR(momentum.item<float>(), 1.9, 1e-6);
}

TEST(OuterRules, HeavyBallMatchesTorchSgdMomentum) {
  at::Tensor phi = values({1.0f, -2.0f}), momentum = values({0.0f, 0.0f});
  const OuterSgdOptions heavy{0.5, 0.8, false};
  outer_sgd_step(phi, momentum, values({2.0f, 4.0f}), heavy);
  outer_sgd_step(phi, momentum, values({2.0f, 4.0f}), heavy);
  // b1 = g, b2 = 0.8 g + g = 1.8 g: phi = phi0 - 0.5 (g + 1.8 g)
  EXPECT_TRUE(at::allclose(phi, values({1.0f - 0.5f * 2.8f * 2.0f, -2.0f - 0.5f * 2.8f * 4.0f})));
}

TEST(OuterRules, OuterSgdOneZeroIsParameterAveraging) {
  const at::Tensor phi0 = at::randn({1000});
  std::vector<at::Tensor> theta;
  at::Tensor mean_delta = at::zeros({1000});
  for (int i = 0; i < 4; ++i) {
    theta.push_back(phi0 + at::randn({1000}) * 0.1);
    mean_delta += (phi0 - theta.back()) / 4;
  }
  at::Tensor phi = phi0.clone(), momentum = at::zeros({1000});
  outer_sgd_step(phi, momentum, mean_delta, OuterSgdOptions{1.0, 0.0, true});
  EXPECT_TRUE(at::allclose(phi, (theta[0] + theta[1] + theta[2] + theta[3]) / 4, 1e-6, 1e-6));
}

TEST(OuterRules, NoLoCoWithoutMomentumOrStepPullsPartnersToTheirMean) {
  at::Tensor a = values({0.0f, 4.0f}), b = values({2.0f, -4.0f});
  const at::Tensor mean = (a + b) / 2, zero = at::zeros({2});
  at::Tensor da = zero.clone(), db = zero.clone();
  const NoLoCoOptions pull{0.0, 0.0, 1.0};
  noloco_step(a, da, mean, zero, pull);
  noloco_step(b, db, mean, zero, pull);
  EXPECT_TRUE(at::equal(a, mean));
  EXPECT_TRUE(at::equal(b, mean));
}

TEST(OuterRules, NoLoCoPaperExample) {
  // phi = (0, 2) on two partners, no progress, gamma 0.7: each moves 0.7 of the way to the mean 1.
  at::Tensor a = values({0.0f}), b = values({2.0f}), da = values({0.0f}), db = values({0.0f});
  const at::Tensor mean = values({1.0f}), zero = values({0.0f});
  const NoLoCoOptions options{0.7, 0.5, 0.7};
  noloco_step(a, da, mean, zero, options);
  noloco_step(b, db, mean, zero, options);
  EXPECT_NEAR(a.item<float>(), 0.7, 1e-6);
  EXPECT_NEAR(b.item<float>(), 1.3, 1e-6);
}

TEST(OuterRules, NoLoCoGlobalMeanFollowsHeavyBallDiLoCoForAnyGrouping) {
  constexpr int kIslands = 7, kRounds = 5;
  std::mt19937 random(3);
  std::vector<at::Tensor> phi, delta;
  for (int i = 0; i < kIslands; ++i) {
    phi.push_back(at::randn({50}, at::TensorOptions().dtype(at::kDouble)));
    delta.push_back(at::zeros({50}, at::TensorOptions().dtype(at::kDouble)));
  }
  const NoLoCoOptions noloco{0.7, 0.5, 0.7};
  at::Tensor dil_phi = at::zeros({50}, at::TensorOptions().dtype(at::kDouble));
  for (const at::Tensor& p : phi) dil_phi += p / kIslands;
  at::Tensor dil_momentum = at::zeros_like(dil_phi);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<at::Tensor> progress;  // theta - phi
    at::Tensor mean_progress = at::zeros_like(dil_phi);
    for (int i = 0; i < kIslands; ++i) {
      progress.push_back(at::randn({50}, at::TensorOptions().dtype(at::kDouble)) * 0.1);
      mean_progress += progress.back() / kIslands;
    }
    // Pairs and a group of three (the remainder), redrawn each round.
    const std::vector<std::vector<int>> groups = gossip_groups(kIslands, 2, 11, round);
    std::vector<at::Tensor> next = phi;
    for (const std::vector<int>& group : groups) {
      at::Tensor gp = at::zeros_like(dil_phi), gd = at::zeros_like(dil_phi);
      for (int i : group) {
        gp += phi[i] / static_cast<double>(group.size());
        gd += progress[i] / static_cast<double>(group.size());
      }
      for (int i : group) {
        next[i] = phi[i].clone();
        noloco_step(next[i], delta[i], gp, gd, noloco);
      }
    }
    phi = next;
    // Heavy-ball DiLoCo with lr b, momentum a on Delta = phi - theta = -progress.
    outer_sgd_step(dil_phi, dil_momentum, -mean_progress, OuterSgdOptions{0.7, 0.5, false});
  }
  at::Tensor global_mean = at::zeros_like(dil_phi);
  for (const at::Tensor& p : phi) global_mean += p / kIslands;
  EXPECT_TRUE(at::allclose(global_mean, dil_phi, 1e-12, 1e-12));
}

TEST(OuterSchedule, StreamingFragmentsSyncStaggered) {
  const SyncSchedule streaming{12, 4, 0};
  std::vector<std::pair<int64_t, int>> starts;
  for (int64_t step = 0; step <= 24; ++step)
    if (auto f = fragment_starting_after(streaming, step)) starts.push_back({step, *f});
  const std::vector<std::pair<int64_t, int>> expected{{3, 0},  {6, 1},  {9, 2},  {12, 3},
                                                      {15, 0}, {18, 1}, {21, 2}, {24, 3}};
  EXPECT_EQ(starts, expected);
}

TEST(OuterSchedule, DiLoCoSyncsEveryHSteps) {
  const SyncSchedule diloco{5, 1, 0};
  for (int64_t step = 0; step <= 20; ++step)
    EXPECT_EQ(fragment_starting_after(diloco, step).has_value(), step > 0 && step % 5 == 0) << step;
  EXPECT_FALSE(in_flight_after(diloco, 7).has_value());
}

TEST(OuterSchedule, InFlightExchangesOfDelayedSchedules) {
  const SyncSchedule streaming{12, 4, 2};
  EXPECT_FALSE(in_flight_after(streaming, 2).has_value());
  const auto at3 = in_flight_after(streaming, 3), at4 = in_flight_after(streaming, 4);
  ASSERT_TRUE(at3 && at4);
  EXPECT_EQ(at3->fragment, 0);
  EXPECT_EQ(at4->applied_after, 5);
  EXPECT_FALSE(in_flight_after(streaming, 5).has_value());
  EXPECT_EQ(in_flight_after(streaming, 7)->fragment, 1);
  const SyncSchedule delayed{10, 1, 10};  // one-step-delayed DiLoCo
  EXPECT_FALSE(in_flight_after(delayed, 9).has_value());
  EXPECT_EQ(in_flight_after(delayed, 10)->applied_after, 20);
  EXPECT_EQ(in_flight_after(delayed, 19)->started_after, 10);
  EXPECT_EQ(in_flight_after(delayed, 20)->applied_after, 30);
}

TEST(OuterSchedule, GossipGroupsCoverEveryIslandOnceAndAgreeAcrossCalls) {
  for (int islands : {2, 4, 5, 8}) {
    std::set<std::vector<std::vector<int>>> seen;
    for (int64_t round = 0; round < 20; ++round) {
      const auto groups = gossip_groups(islands, 2, 1234, round);
      EXPECT_EQ(groups, gossip_groups(islands, 2, 1234, round)) << "the same on every rank";
      std::vector<int> all;
      for (const auto& g : groups) {
        EXPECT_GE(g.size(), 2u);
        all.insert(all.end(), g.begin(), g.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int> expected(static_cast<size_t>(islands));
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(all, expected);
      seen.insert(groups);
    }
    if (islands >= 4) {
      EXPECT_GT(seen.size(), 1u) << "the pairing changes with the outer step";
    }
  }
  EXPECT_EQ(gossip_groups(5, 2, 1, 0).back().size(), 3u) << "the remainder joins the last group";
}

TEST(SimulatedLinkTest, SecondsFromBandwidthAndLatency) {
  const SimulatedLink link{100.0, 20.0};
  EXPECT_DOUBLE_EQ(link.seconds(12'500'000, 0), 1.0);  // 100 Mbit/s = 12.5 MB/s
  EXPECT_DOUBLE_EQ(link.seconds(0, 3), 0.06);
  EXPECT_FALSE(SimulatedLink{}.enabled());
  const auto start = std::chrono::steady_clock::now();
  const SimulatedLink latency_only{0.0, 50.0};
  EXPECT_DOUBLE_EQ(latency_only.hold_until_delivered(start, 0, 1), 0.05);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace atl::optim::outer
