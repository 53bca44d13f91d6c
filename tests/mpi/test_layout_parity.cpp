// Layout parity for data and tensor parallelism: the same global batch trained on one rank and on
// all launched ranks -- data parallel (DP = 2 or 4, with and without gradient accumulation), tensor
// parallel (TP = 2 or 4) and TP x DP -- gives the same losses, gradients and parameters
// (tests/parity_harness.h says exactly what is compared).
#include "tests/parity_harness.h"

using atl::runtime::Config;
using atl::test::expect_parity;
using atl::test::layout;
using atl::test::world_size;

TEST(DataParallelParity, MatchesOneRank) {
  Config config = layout("dp", 1);
  config.optim.grad_clip = 0.0;  // unclipped, so the gradients compared are the raw dp average
  expect_parity(config);
}

TEST(DataParallelParity, GradientAccumulationMatchesOneRank) {
  Config config = layout("accum", 1);
  config.parallel.microbatches = 2;
  expect_parity(config);
}

TEST(DataParallelParity, TiedEmbeddingsMatchOneRank) {
  Config config = layout("tied", 1);
  config.model.tie_embeddings = true;
  expect_parity(config);
}

TEST(TensorParallelParity, MatchesOneRank) {
  Config config = layout("tp", world_size());
  config.model.heads = config.model.kv_heads = 4;
  config.optim.grad_clip = 0.0;
  expect_parity(config);
}

TEST(TensorParallelParity, SequenceParallelMatchesOneRank) {
  Config config = layout("tp-sp", world_size());
  config.model.heads = config.model.kv_heads = 4;
  config.parallel.sequence_parallel = true;
  config.optim.grad_clip = 0.0;
  expect_parity(config);
}

TEST(TensorParallelParity, TiedEmbeddingsAndGroupedQueryAttentionMatchOneRank) {
  Config config = layout("tp-tied", world_size());
  config.model.heads = 8;
  config.model.kv_heads = world_size();  // GQA with one kv head per tp rank
  config.model.tie_embeddings = true;
  expect_parity(config);
}

ATOLL_RUNS_AT(TensorParallelParity, TwoByDataParallelMatchesOneRank, 4);
TEST(TensorParallelParity, TwoByDataParallelMatchesOneRank) {
  expect_parity(layout("tpdp", 2));
}
