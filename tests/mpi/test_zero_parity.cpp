// ZeRO parity: stages 1, 2 and 3 train exactly like plain data parallelism in the same layout --
// same losses, gradient norms, parameters and validation loss -- alone and composed with gradient
// accumulation, tensor and pipeline parallelism, tied embeddings, and buckets that are tiny or hold
// parameter counts that do not divide by dp. And the model state each rank really allocates matches
// `atoll plan`'s prediction.
#include "parallel/sharded_data_parallel.h"
#include "runtime/plan.h"
#include "tests/parity_harness.h"

namespace {

using atl::runtime::Config;
using atl::test::layout;
using atl::test::world_size;

// Relative L2 distance of two tensors (0 when both are zero).
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.norm().item<double>();
  return (a - b).norm().item<double>() / (scale > 0 ? scale : 1.0);
}

// Trains `config` with ZeRO stage 0 and with `stage` on all launched ranks and compares.
// `bitwise`: the parameters must be identical to the last bit (when the reduction order allows:
// a reduce-scatter and an all-reduce over two ranks add the same two numbers); else within
// `tolerance` relative.
void expect_zero_parity(Config config, int stage, bool bitwise, double tolerance = 1e-6) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  config.train.eval_every = 1;  // only enables evaluation after training in the harness
  Config plain = config;
  plain.parallel.zero = 0;
  plain.run.dir += "-zero0";
  config.parallel.zero = stage;
  const atl::test::RunResult reference = atl::test::train(plain, *world);
  const atl::test::RunResult sharded = atl::test::train(config, *world);

  ASSERT_EQ(sharded.losses.size(), reference.losses.size());
  for (size_t s = 0; s < sharded.losses.size(); ++s) {
    EXPECT_NEAR(sharded.losses[s], reference.losses[s], 1e-6 * std::abs(reference.losses[s]))
        << "step " << s + 1;
    // Gradients to the brief's 1e-5: a reduce-scatter per microbatch (ZeRO-2/3) sums in another order.
    EXPECT_NEAR(sharded.grad_norms[s], reference.grad_norms[s], 1e-5 * reference.grad_norms[s])
        << "step " << s + 1;
  }
  EXPECT_LT(sharded.losses.back(), sharded.losses.front() - 0.5) << "the loss should fall";
  ASSERT_EQ(sharded.final_params.size(), reference.final_params.size());
  for (const auto& [name, expected] : reference.final_params) {
    const at::Tensor& ours = sharded.final_params.at(name);
    ASSERT_EQ(ours.sizes(), expected.sizes()) << name;
    if (bitwise)
      EXPECT_TRUE(ours.equal(expected))
          << name << " max diff " << (ours - expected).abs().max().item<double>();
    else
      EXPECT_LT(relative_error(ours, expected), tolerance) << name;
  }
  EXPECT_NEAR(sharded.val_loss, reference.val_loss, 1e-6 * reference.val_loss);
}

class ZeroStage : public ::testing::TestWithParam<int> {};

TEST_P(ZeroStage, MatchesPlainDataParallelism) {
  Config config = layout("zero" + std::to_string(GetParam()), 1);
  config.optim.grad_clip = 0.0;  // the clip factor would carry the norm's rounding into the parameters
  expect_zero_parity(config, GetParam(), /*bitwise=*/world_size() == 2);
}

TEST_P(ZeroStage, WithGradientAccumulationClippingAndTiedEmbeddings) {
  Config config = layout("zero-accum" + std::to_string(GetParam()), 1);
  config.parallel.microbatches = 2;
  config.model.tie_embeddings = true;
  expect_zero_parity(config, GetParam(), false);
}

// Every parameter in a bucket of its own (tiny buckets), and norms of 42 elements: counts that do
// not divide by dp, so buckets end in padding.
TEST_P(ZeroStage, TinyBucketsAndCountsNotDivisibleByDp) {
  Config config = layout("zero-uneven" + std::to_string(GetParam()), 1);
  config.model.dim = 42;
  config.model.heads = config.model.kv_heads = 3;
  config.model.ffn = 110;
  config.parallel.bucket_mb = 1e-5;
  expect_zero_parity(config, GetParam(), false);
}

TEST_P(ZeroStage, WithTensorParallelism) {
  if (world_size() < 4) GTEST_SKIP() << "TP=2 x DP=2 needs 4 ranks";
  Config config = layout("zero-tp" + std::to_string(GetParam()), 2);
  config.parallel.sequence_parallel = true;
  expect_zero_parity(config, GetParam(), false);
}

TEST_P(ZeroStage, WithPipelineParallelismAndTiedEmbeddings) {
  if (world_size() < 4) GTEST_SKIP() << "PP=2 x DP=2 needs 4 ranks";
  Config config = layout("zero-pp" + std::to_string(GetParam()), 1, 2);
  config.parallel.microbatches = 2;
  config.model.tie_embeddings = true;
  expect_zero_parity(config, GetParam(), false);
}

// Interleaved 1F1B: two model chunks per rank, so units of both chunks are gathered and freed as
// the schedule alternates between them.
TEST_P(ZeroStage, WithInterleavedPipeline) {
  if (world_size() < 4) GTEST_SKIP() << "PP=2 x DP=2 needs 4 ranks";
  Config config = layout("zero-vpp" + std::to_string(GetParam()), 1, 2);
  config.model.layers = 4;
  config.parallel.schedule = "interleaved";
  config.parallel.virtual_stages = 2;
  config.parallel.microbatches = 2;
  config.optim.grad_clip = 0.0;
  // 4 layers over 2 chunks: ZeRO-2/3's per-microbatch sums drift to 4e-6 in 20 steps, so this
  // extra layout is held to the brief's fp32 parity bound (1e-5) rather than 1e-6.
  expect_zero_parity(config, GetParam(), false, 1e-5);
}

// The bytes of model state each rank allocates, measured from its live buffers after training
// steps, against atoll plan's prediction for the layout.
TEST_P(ZeroStage, ModelStateMatchesThePlan) {
  Config config = layout("zero-memory" + std::to_string(GetParam()), 1);
  config.parallel.zero = GetParam();
  config.train.steps = 2;
  atl::runtime::Trainer trainer(config, *atl::test::MpiTestEnv::runtime().world(), nullptr);
  for (int s = 0; s < config.train.steps; ++s) trainer.train_step();
  const atl::parallel::ModelStateBytes measured = trainer.model_state_bytes();
  const atl::runtime::StagePlan planned = atl::runtime::make_plan(config).stages.at(0);
  const auto within_5_percent = [](double ours, double plan) { return std::abs(ours - plan) <= 0.05 * plan; };
  EXPECT_PRED2(within_5_percent, static_cast<double>(measured.parameters), planned.parameter_bytes);
  EXPECT_PRED2(within_5_percent, static_cast<double>(measured.gradients), planned.gradient_bytes);
  EXPECT_PRED2(within_5_percent, static_cast<double>(measured.optimizer), planned.optimizer_bytes);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStage, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Zero" + std::to_string(info.param);
                         });

// Stage 0 against the plan too: the baseline the ZeRO ratios are taken from.
TEST(ZeroStage0, ModelStateMatchesThePlan) {
  Config config = layout("zero-memory0", 1);
  config.train.steps = 1;
  atl::runtime::Trainer trainer(config, *atl::test::MpiTestEnv::runtime().world(), nullptr);
  trainer.train_step();
  const atl::parallel::ModelStateBytes measured = trainer.model_state_bytes();
  const atl::runtime::StagePlan planned = atl::runtime::make_plan(config).stages.at(0);
  EXPECT_NEAR(static_cast<double>(measured.total()), planned.model_state_bytes(),
              0.05 * planned.model_state_bytes());
}

}  // namespace
