// ZeRO parity: stages 1, 2 and 3 train exactly like plain data parallelism in the same layout --
// same losses, gradient norms, parameters and validation loss -- alone and composed with gradient
// accumulation, tensor and pipeline parallelism, tied embeddings, and buckets that are tiny or hold
// parameter counts that do not divide by dp. And the model state each rank really allocates matches
// `atoll plan`'s prediction.
#include "tests/parity_harness.h"

namespace {

using atl::runtime::Config;
using atl::test::layout;
using atl::test::world_size;

using atl::test::expect_zero_parity;

// Each case trains its layout with stage 0 once and compares stages 1, 2 and 3 with it
// (expect_zero_parity).
TEST(ZeroParity, MatchesPlainDataParallelism) {
  Config config = layout("zero", 1);
  config.optim.grad_clip = 0.0;  // the clip factor would carry the norm's rounding into the parameters
  atl::test::Agreement agreement;
  agreement.bitwise = world_size() == 2;
  expect_zero_parity(config, agreement);
}

TEST(ZeroParity, WithGradientAccumulationClippingAndTiedEmbeddings) {
  Config config = layout("zero-accum", 1);
  config.parallel.microbatches = 2;
  config.model.tie_embeddings = true;
  expect_zero_parity(config);
}

// Every parameter in a bucket of its own (tiny buckets), and norms of 42 elements: counts that do
// not divide by dp, so buckets end in padding.
TEST(ZeroParity, TinyBucketsAndCountsNotDivisibleByDp) {
  Config config = layout("zero-uneven", 1);
  config.model.dim = 42;
  config.model.heads = config.model.kv_heads = 3;
  config.model.ffn = 110;
  config.parallel.bucket_mb = 1e-5;
  expect_zero_parity(config);
}

ATOLL_RUNS_AT(ZeroParity, WithTensorParallelism, 4);
TEST(ZeroParity, WithTensorParallelism) {
  Config config = layout("zero-tp", 2);
  config.parallel.sequence_parallel = true;
  expect_zero_parity(config);
}

ATOLL_RUNS_AT(ZeroParity, WithPipelineParallelismAndTiedEmbeddings, 4);
TEST(ZeroParity, WithPipelineParallelismAndTiedEmbeddings) {
  Config config = layout("zero-pp", 1, 2);
  config.parallel.microbatches = 2;
  config.model.tie_embeddings = true;
  expect_zero_parity(config);
}

// Interleaved 1F1B: two model chunks per rank, so units of both chunks are gathered and freed as
// the schedule alternates between them.
ATOLL_RUNS_AT(ZeroParity, WithInterleavedPipeline, 4);
TEST(ZeroParity, WithInterleavedPipeline) {
  Config config = layout("zero-vpp", 1, 2);
  config.model.layers = 4;
  config.parallel.schedule = atl::runtime::PipelineSchedule::kInterleaved;
  config.parallel.virtual_stages = 2;
  config.parallel.microbatches = 2;
  config.optim.grad_clip = 0.0;
  // 4 layers over 2 chunks: ZeRO-2/3's per-microbatch sums drift to 4e-6 in 20 steps, so this
  // extra layout is held to the brief's fp32 parity bound (1e-5) rather than 1e-6.
  atl::test::Agreement agreement;
  agreement.params = 1e-5;
  expect_zero_parity(config, agreement);
}

// kernels.first_grad_copy (on by default on a GPU): each parameter's first gradient of a step is
// copied into the flat buffer, not added to zeros -- the same sums, so the same training to the last
// bit, with accumulation (later microbatches add), tied embeddings, pipeline stages and tensor
// parallelism with SP (on 4 ranks), bf16's fp32 gradients and full recomputation (gradients
// landing from a backward inside a backward), at ZeRO 0 and 1.
TEST(ZeroParity, FirstGradCopyTrainsBitwiseLikeTheZeroedBuffer) {
  for (const int zero : {0, 1}) {
    for (const auto precision : {atl::runtime::Precision::kFp32, atl::runtime::Precision::kBf16}) {
      // Each way a decoder layer's linear can run: plain, rerun with its kept product (selective),
      // rerun computing it (full).
      const auto recompute = precision == atl::runtime::Precision::kBf16 ? atl::runtime::Recompute::kFull
                             : zero == 1                                 ? atl::runtime::Recompute::kSelective
                                                                         : atl::runtime::Recompute::kNone;
      SCOPED_TRACE("ZeRO-" + std::to_string(zero) +
                   (precision == atl::runtime::Precision::kBf16 ? " bf16" : " fp32") + " recompute " +
                   std::to_string(static_cast<int>(recompute)));
      // On 4 ranks: PP=2 x DP=2 at ZeRO-0, TP=2 (+SP) x DP=2 at ZeRO-1.
      const bool four = world_size() >= 4;
      Config config = layout("first-grad-copy", four && zero == 1 ? 2 : 1, four && zero == 0 ? 2 : 1);
      config.parallel.sequence_parallel = config.parallel.tp > 1;
      config.parallel.zero = zero;
      config.parallel.microbatches = 2;
      config.model.tie_embeddings = true;
      config.train.precision = precision;
      config.train.recompute = recompute;
      config.train.eval_every = 1;  // only enables evaluation after training in the harness
      config.kernels.first_grad_copy = atl::runtime::KernelChoice::kOff;
      config.kernels.fused_weight_grad = atl::runtime::KernelChoice::kOff;
      config.run.dir += "-zeroed";
      const atl::test::RunResult zeroed = atl::test::train(config, *atl::test::MpiTestEnv::runtime().world());
      // Copied from autograd's gradients, then also written by the weight-gradient products.
      for (const auto fused_weight_grad :
           {atl::runtime::KernelChoice::kOff, atl::runtime::KernelChoice::kOn}) {
        const bool fused = fused_weight_grad == atl::runtime::KernelChoice::kOn;
        SCOPED_TRACE(fused ? "first_grad_copy + fused_weight_grad" : "first_grad_copy");
        config.kernels.first_grad_copy = atl::runtime::KernelChoice::kOn;
        config.kernels.fused_weight_grad = fused_weight_grad;
        config.run.dir += fused ? "-fused" : "-copied";
        const atl::test::RunResult copied =
            atl::test::train(config, *atl::test::MpiTestEnv::runtime().world());
        // Under mixed precision the products land in the fp32 buffer without autograd's rounding
        // of each to bf16 (2^-9 relative at most): the first step's gradients close, not equal, and
        // bf16 training carries the difference on (1% in a grad norm by step 12 here; a gradient
        // landed twice or lost shows at step 1).
        if (fused && precision == atl::runtime::Precision::kBf16) {
          EXPECT_EQ(copied.losses.front(), zeroed.losses.front());  // the same forward
          EXPECT_NEAR(copied.grad_norms.front(), zeroed.grad_norms.front(), 1e-3 * zeroed.grad_norms.front());
          atl::test::expect_runs_agree(copied, zeroed, {1e-3, 2e-2, 1e-2, false});
          for (const auto& [name, grad] : zeroed.first_step_grads) {
            EXPECT_LT(atl::test::relative_error(copied.first_step_grads.at(name), grad), 2e-3) << name;
            if (name.find("proj") != std::string::npos) {  // a decoder layer's linear: the sink's product
              EXPECT_FALSE(copied.first_step_grads.at(name).equal(grad)) << name << ": not rounded to bf16";
            }
          }
          continue;
        }
        EXPECT_EQ(copied.losses, zeroed.losses);
        EXPECT_EQ(copied.grad_norms, zeroed.grad_norms);
        atl::test::Agreement bitwise;
        bitwise.bitwise = true;
        atl::test::expect_runs_agree(copied, zeroed, bitwise);
        for (const auto& [name, grad] : zeroed.first_step_grads)
          EXPECT_TRUE(copied.first_step_grads.at(name).equal(grad)) << name;
      }
    }
  }
}

class ZeroStage : public ::testing::TestWithParam<int> {};

// The bytes of model state each rank allocates, measured from its live buffers after training
// steps, against atoll plan's prediction for the layout.
TEST_P(ZeroStage, ModelStateMatchesThePlan) {
  Config config = layout("zero-memory" + std::to_string(GetParam()), 1);
  config.parallel.zero = GetParam();
  atl::test::expect_model_state_as_planned(config);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStage, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "Zero" + std::to_string(info.param);
                         });

// Stage 0 against the plan too: the baseline the ZeRO ratios are taken from.
TEST(ZeroStage0, ModelStateMatchesThePlan) {
  atl::test::expect_model_state_as_planned(layout("zero-memory0", 1));
}

}  // namespace
