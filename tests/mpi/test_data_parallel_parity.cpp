// Data-parallel parity: the same global batch trained on one rank and on all launched ranks
// (DP = 2 or 4), with and without gradient accumulation, gives the same losses (1e-5 relative)
// for 20 steps, the same gradients, and the same parameters after them; every dp replica holds
// bitwise-identical parameters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "comm/mpi_communicator.h"
#include "parallel/flat_parameters.h"
#include "runtime/trainer.h"
#include "tests/mpi_test_env.h"
#include "tests/training_fixture.h"

namespace {

using atl::runtime::Config;
using atl::runtime::Trainer;

struct RunResult {
  std::vector<double> losses;
  at::Tensor first_step_grads;
  at::Tensor final_params;
  double val_loss = 0.0;
};

RunResult train(const Config& config, const atl::comm::MpiCommunicator& comm) {
  Trainer trainer(config, comm, nullptr);
  RunResult result;
  for (int s = 0; s < config.train.steps; ++s) {
    result.losses.push_back(trainer.train_step().loss);
    if (s == 0) result.first_step_grads = trainer.parameters().grads().clone();
  }
  result.final_params = trainer.parameters().values().clone();
  result.val_loss = trainer.evaluate();
  return result;
}

// One rank alone, on a communicator of its own.
RunResult train_single_rank(Config config) {
  config.parallel.dp = 1;
  config.parallel.microbatches = 1;
  config.run.dir += "-single";
  MPI_Comm self;
  MPI_Comm_dup(MPI_COMM_SELF, &self);
  atl::comm::MpiCommunicator comm(atl::test::MpiTestEnv::runtime(), self, "self");
  return train(config, comm);
}

double max_relative(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

void expect_parity(const Config& config) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  const RunResult reference = train_single_rank(config);
  const RunResult dp = train(config, *world);

  ASSERT_EQ(dp.losses.size(), reference.losses.size());
  for (size_t s = 0; s < dp.losses.size(); ++s)
    EXPECT_NEAR(dp.losses[s], reference.losses[s], 1e-5 * std::abs(reference.losses[s])) << "step " << s + 1;
  EXPECT_LT(dp.losses.back(), dp.losses.front() - 0.5) << "the loss should fall";
  EXPECT_LT(max_relative(dp.first_step_grads, reference.first_step_grads), 1e-5);
  EXPECT_TRUE(at::allclose(dp.final_params, reference.final_params, /*rtol=*/1e-5, /*atol=*/1e-5))
      << "max abs diff " << (dp.final_params - reference.final_params).abs().max().item<double>();
  EXPECT_NEAR(dp.val_loss, reference.val_loss, 1e-5 * reference.val_loss);

  // Replicas agree bitwise: compare against rank 0's parameters.
  at::Tensor rank0 = dp.final_params.clone();
  world->broadcast(rank0, 0)->wait();
  EXPECT_TRUE(rank0.equal(dp.final_params));
}

}  // namespace

TEST(DataParallelParity, MatchesOneRank) {
  Config config = atl::test::tiny_config(atl::test::write_synthetic_dataset("dp"));
  auto world = atl::test::MpiTestEnv::runtime().world();
  config.parallel.dp = world->size();
  expect_parity(config);
}

TEST(DataParallelParity, GradientAccumulationMatchesOneRank) {
  Config config = atl::test::tiny_config(atl::test::write_synthetic_dataset("accum"));
  auto world = atl::test::MpiTestEnv::runtime().world();
  config.parallel.dp = world->size();
  config.parallel.microbatches = 2;
  expect_parity(config);
}

TEST(DataParallelParity, TiedEmbeddingsMatchOneRank) {
  Config config = atl::test::tiny_config(atl::test::write_synthetic_dataset("tied"));
  auto world = atl::test::MpiTestEnv::runtime().world();
  config.parallel.dp = world->size();
  config.model.tie_embeddings = true;
  expect_parity(config);
}
