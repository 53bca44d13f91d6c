// Pipeline parity: GPipe, 1F1B and interleaved 1F1B over all launched ranks (PP = 2 or 4), PP with
// data parallelism and tied embeddings, uneven stage splits, document masks through 4 stages, and
// TP x PP x DP on 8 ranks, each against one rank for 20 steps (10 with documents): same losses,
// gradients and parameters (tests/parity_harness.h).
#include "tests/parity_harness.h"

using atl::runtime::Config;
using atl::test::expect_parity;
using atl::test::layout;
using atl::test::world_size;

namespace {

// The whole world as one pipeline, microbatches = 2 * pp (so every schedule has a steady state).
Config pipeline(const std::string& tag, atl::runtime::PipelineSchedule schedule, int layers) {
  Config config = layout(tag, /*tp=*/1, /*pp=*/world_size());
  config.model.layers = layers;
  config.parallel.schedule = schedule;
  config.parallel.microbatches = 2 * world_size();
  config.train.global_batch = 4 * world_size();
  config.optim.grad_clip = 0.0;  // unclipped, so the gradients compared are raw
  return config;
}

}  // namespace

ATOLL_RUNS_AT(PipelineParity, GPipeMatchesOneRank, 2, 4);
TEST(PipelineParity, GPipeMatchesOneRank) {
  expect_parity(pipeline("gpipe", atl::runtime::PipelineSchedule::kGPipe, 4));
}

ATOLL_RUNS_AT(PipelineParity, OneFOneBMatchesOneRank, 2, 4);
TEST(PipelineParity, OneFOneBMatchesOneRank) {
  expect_parity(pipeline("1f1b", atl::runtime::PipelineSchedule::kOneFOneB, 4));
}

ATOLL_RUNS_AT(PipelineParity, InterleavedMatchesOneRank, 2, 4);
TEST(PipelineParity, InterleavedMatchesOneRank) {
  Config config = pipeline("interleaved", atl::runtime::PipelineSchedule::kInterleaved, 2 * world_size());
  config.parallel.virtual_stages = 2;
  expect_parity(config);
}

// model.document_mask through 4 stages, two of which load no tokens and read the documents for
// their layers' attention; with full recomputation each layer reruns in its backward, after later
// microbatches' forwards, with its own microbatch's documents.
ATOLL_RUNS_AT(PipelineParity, DocumentMaskReachesEveryStageAndMatchesOneRank, 4);
TEST(PipelineParity, DocumentMaskReachesEveryStageAndMatchesOneRank) {
  Config config = pipeline("documents", atl::runtime::PipelineSchedule::kOneFOneB, 4);
  atl::test::use_packed_documents(config);
  config.train.recompute = atl::runtime::Recompute::kFull;
  config.train.steps = 10;
  expect_parity(config);
}

ATOLL_RUNS_AT(PipelineParity, UnevenStageLayersAndEvaluationMatchOneRank, 2);
TEST(PipelineParity, UnevenStageLayersAndEvaluationMatchOneRank) {
  Config config = pipeline("uneven", atl::runtime::PipelineSchedule::kOneFOneB, 3);
  config.parallel.stage_layers = {1, 2};
  config.train.eval_every = 10;
  expect_parity(config);
}

ATOLL_RUNS_AT(PipelineParity, TiedEmbeddingsWithDataParallelMatchOneRank, 2, 4);
TEST(PipelineParity, TiedEmbeddingsWithDataParallelMatchOneRank) {
  Config config = layout("pp-tied", /*tp=*/1, /*pp=*/2);
  config.model.layers = 4;
  config.model.tie_embeddings = true;
  config.parallel.microbatches = 4;
  config.train.global_batch = 8 * config.parallel.dp;
  expect_parity(config);  // clipping on: the grad norm counts the tied embedding once
}

ATOLL_RUNS_AT(PipelineParity, ThreeDimensionalLayoutMatchesOneRank, 8);
TEST(PipelineParity, ThreeDimensionalLayoutMatchesOneRank) {
  Config config = layout("3d", /*tp=*/2, /*pp=*/2);
  config.model.layers = 4;
  config.model.tie_embeddings = true;
  config.parallel.sequence_parallel = true;
  config.parallel.microbatches = 4;
  config.train.global_batch = 16;
  expect_parity(config);
}

// Sequence parallelism shards what the stages send each other along the sequence: at TP=2 x PP=2 a
// step's pipeline bytes halve with it, as `atoll plan` predicts. (Parity alone would pass a
// sequence_parallel setting that was ignored: the sums are the same either way.)
ATOLL_RUNS_AT(PipelineParity, SequenceParallelHalvesTheStageMessages, 4);
TEST(PipelineParity, SequenceParallelHalvesTheStageMessages) {
  Config config = layout("sp-bytes", /*tp=*/2, /*pp=*/2);
  config.model.layers = 2;
  config.parallel.microbatches = 2;
  const double whole = static_cast<double>(atl::test::first_step_metrics(config).pp_bytes);
  config.parallel.sequence_parallel = true;
  config.run.dir += "-sp";
  const double sharded = static_cast<double>(atl::test::first_step_metrics(config).pp_bytes);
  EXPECT_GT(sharded, 0.0);
  EXPECT_NEAR(sharded, whole / 2, 0.01 * whole) << "without sequence parallelism " << whole;
  EXPECT_NEAR(sharded, atl::launcher::make_plan(config).stages.at(0).pp_bytes, 0.01 * sharded);
}
