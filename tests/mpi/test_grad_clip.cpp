// Global grad-norm clipping across a model group: each rank holds a different part of the model;
// replicated parameters (e.g. TP-replicated norms) are counted once. The norm must equal the
// direct computation over the whole model, and clipping must scale every gradient by
// max_norm / (norm + 1e-6) only when that is below one.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "comm/mpi_communicator.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "parallel/flat_parameters.h"
#include "tests/mpi_test_env.h"

namespace {

// Rank r's part: a weight unique to it and a norm replicated on every rank.
atl::parallel::FlatParameters model_part(int rank) {
  atl::parallel::FlatParameters flat({{"w", {4, 3}, true, false}, {"norm", {3}, false, true}}, at::kFloat);
  flat.entry("w").grad.copy_(at::arange(12, at::kFloat).view({4, 3}) * (rank + 1) * 0.1);
  flat.entry("norm").grad.copy_(at::tensor({1.0f, -2.0f, 0.5f}));
  return flat;
}

// The replicated norm counts on rank 0 only.
std::vector<at::Tensor> counted_pieces(const atl::parallel::FlatParameters& flat, int rank) {
  std::vector<at::Tensor> pieces{flat.entry("w").grad};
  if (rank == 0) pieces.push_back(flat.entry("norm").grad);
  return pieces;
}

}  // namespace

TEST(GradClip, GlobalNormCountsReplicatedParametersOnce) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  atl::parallel::FlatParameters mine = model_part(world->rank());
  const double norm = atl::optim::global_grad_norm(counted_pieces(mine, world->rank()), {world.get()});

  double direct = 1.0 + 4.0 + 0.25;  // the replicated norm, once
  for (int r = 0; r < world->size(); ++r)
    direct += model_part(r).entry("w").grad.to(at::kDouble).pow(2).sum().item<double>();
  EXPECT_NEAR(norm, std::sqrt(direct), 1e-12 * std::sqrt(direct));
}

TEST(GradClip, ScalesOnlyAboveTheThreshold) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  const atl::parallel::FlatParameters flat = model_part(world->rank());
  const double norm = atl::optim::global_grad_norm(counted_pieces(flat, world->rank()), {world.get()});

  EXPECT_EQ(atl::optim::clip_factor(norm, norm * 2), 1.0);
  EXPECT_EQ(atl::optim::clip_factor(norm, 0.0), 1.0);  // clipping off
  EXPECT_NEAR(atl::optim::clip_factor(norm, 1.0), 1.0 / (norm + 1e-6), 1e-15);
}

// The optimizer applies the factor to its gradients before the update -- in a pass of its own, or
// (fused_clip) inside the fused kernel, which writes the scaled gradients back: either way the
// gradients end clipped to norm 1, and the two updates agree to fp32 rounding.
TEST(GradClip, TheOptimizerScalesItsGradientsSeparatelyOrInsideTheFusedKernel) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  const double lr = 1e-2;
  std::vector<at::Tensor> final_values;
  for (const auto& [fused, fused_clip] : {std::pair{false, false}, {true, false}, {true, true}}) {
    SCOPED_TRACE(std::string("fused ") + (fused ? "on" : "off") + ", fused_clip " +
                 (fused_clip ? "on" : "off"));
    atl::parallel::FlatParameters flat = model_part(world->rank());
    const at::Tensor before = flat.grads().clone();
    const double norm = atl::optim::global_grad_norm(counted_pieces(flat, world->rank()), {world.get()});
    const double factor = atl::optim::clip_factor(norm, 1.0);
    atl::optim::FlatAdamW optimizer({flat.values()}, flat.grads(), {{0, flat.numel()}},
                                    {0.9, 0.95, 1e-8, 0.1, fused, fused_clip});
    optimizer.step(lr, factor);
    EXPECT_TRUE(at::allclose(flat.grads(), before * factor, 1e-6, 0.0));
    EXPECT_NEAR(atl::optim::global_grad_norm(counted_pieces(flat, world->rank()), {world.get()}), 1.0, 1e-6);
    final_values.push_back(flat.values().clone());
  }
  EXPECT_LT((final_values[1] - final_values[0]).abs().max().item<double>(), 1e-6);
  EXPECT_LT((final_values[2] - final_values[0]).abs().max().item<double>(), 1e-6);
}
