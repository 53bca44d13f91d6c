// Layout parity: the same global batch trained on one rank and on all launched ranks -- data
// parallel (DP = 2 or 4, with and without gradient accumulation), tensor parallel (TP = 2 or 4) and
// TP x DP -- gives the same losses and pre-clip gradient norms (1e-5 relative) for 20 steps, the
// same first-step gradients and the same parameters after them (each rank's shard against the
// matching slice of the one-rank tensor); dp replicas hold bitwise-identical parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "comm/mpi_communicator.h"
#include "parallel/flat_parameters.h"
#include "runtime/llama.h"
#include "runtime/trainer.h"

#include <map>
#include "tests/mpi_test_env.h"
#include "tests/training_fixture.h"

namespace {

using atl::runtime::Config;
using atl::runtime::Trainer;

struct RunResult {
  std::vector<double> losses;
  std::vector<double> grad_norms;  // before clipping: sees gradient scale, which AdamW's update hides
  std::map<std::string, at::Tensor> first_step_grads, final_params;  // this rank's pieces, by name
  double val_loss = 0.0;
};

std::map<std::string, at::Tensor> by_name(const atl::parallel::FlatParameters& params, bool grads) {
  std::map<std::string, at::Tensor> out;
  for (const atl::parallel::FlatEntry& e : params.entries())
    out[e.info.name] = (grads ? e.grad : e.value).detach().clone();
  return out;
}

RunResult train(const Config& config, const atl::comm::MpiCommunicator& comm) {
  Trainer trainer(config, comm, nullptr);
  RunResult result;
  for (int s = 0; s < config.train.steps; ++s) {
    const atl::runtime::StepMetrics m = trainer.train_step();
    result.losses.push_back(m.loss);
    result.grad_norms.push_back(m.grad_norm);
    if (s == 0) result.first_step_grads = by_name(trainer.parameters(), /*grads=*/true);
  }
  result.final_params = by_name(trainer.parameters(), /*grads=*/false);
  result.val_loss = trainer.evaluate();
  return result;
}

// One rank alone, on a communicator of its own.
RunResult train_single_rank(Config config) {
  config.parallel.dp = 1;
  config.parallel.tp = 1;
  config.parallel.sequence_parallel = false;
  config.parallel.microbatches = 1;
  config.run.dir += "-single";
  MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  atl::comm::MpiCommunicator comm(atl::test::MpiTestEnv::runtime(), self, "self");
  return train(config, comm);
}

// Relative L2 error of this rank's piece of every tensor against the one-rank tensor's slice.
// (Elementwise, AdamW's m/sqrt(v) turns 1e-7 rounding noise in near-zero gradients into visible
// differences of single elements, which a per-tensor norm weighs for what they are.)
void expect_pieces_match(const Config& config, int tp_rank, const std::map<std::string, at::Tensor>& ours,
                         const std::map<std::string, at::Tensor>& reference, const char* what) {
  for (const auto& [name, piece] : ours) {
    const at::Tensor expected = atl::runtime::LlamaModel::shard_of(config.model, config.parallel.tp, tp_rank,
                                                                   name, reference.at(name));
    ASSERT_EQ(piece.sizes(), expected.sizes()) << name;
    const double scale = expected.norm().item<double>();
    const double error = (piece - expected).norm().item<double>() / (scale > 0 ? scale : 1.0);
    EXPECT_LT(error, 1e-5) << what << " " << name;
  }
}

void expect_parity(const Config& config) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  const RunResult reference = train_single_rank(config);
  const RunResult dp = train(config, *world);

  ASSERT_EQ(dp.losses.size(), reference.losses.size());
  for (size_t s = 0; s < dp.losses.size(); ++s)
    EXPECT_NEAR(dp.losses[s], reference.losses[s], 1e-5 * std::abs(reference.losses[s])) << "step " << s + 1;
  for (size_t s = 0; s < dp.grad_norms.size(); ++s)
    EXPECT_NEAR(dp.grad_norms[s], reference.grad_norms[s], 1e-5 * reference.grad_norms[s])
        << "step " << s + 1;
  EXPECT_LT(dp.losses.back(), dp.losses.front() - 0.5) << "the loss should fall";
  const int tp_rank = world->rank() % config.parallel.tp;
  expect_pieces_match(config, tp_rank, dp.first_step_grads, reference.first_step_grads,
                      "first-step gradient");
  expect_pieces_match(config, tp_rank, dp.final_params, reference.final_params, "parameter after 20 steps");
  EXPECT_NEAR(dp.val_loss, reference.val_loss, 1e-5 * reference.val_loss);

  // Data-parallel replicas agree bitwise: each piece against the first dp replica's, over the dp
  // group of this tp rank (world ranks with the same tp coordinate, as in the mesh).
  auto dp_group = world->split(tp_rank, world->rank(), "dp");
  for (const auto& [name, piece] : dp.final_params) {
    at::Tensor first_replica = piece.contiguous().clone();
    dp_group->broadcast(first_replica, 0)->wait();
    EXPECT_TRUE(first_replica.equal(piece)) << name;
  }
}

}  // namespace

// The tiny config on its own data, laid out as dp x tp over all launched ranks.
Config layout(const std::string& tag, int tp) {
  const int world_size = atl::test::MpiTestEnv::runtime().world()->size();
  Config config = atl::test::tiny_config(atl::test::write_synthetic_dataset(tag));
  config.parallel.tp = tp;
  config.parallel.dp = world_size / tp;
  return config;
}

int world_size() {
  return atl::test::MpiTestEnv::runtime().world()->size();
}

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

TEST(TensorParallelParity, TwoByDataParallelMatchesOneRank) {
  if (world_size() < 4) GTEST_SKIP() << "TP=2 x DP=2 needs 4 ranks";
  expect_parity(layout("tpdp", 2));
}
