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
  std::vector<double> grad_norms;  // before clipping: sees gradient scale, which AdamW's update hides
  at::Tensor first_step_grads;
  at::Tensor final_params;
  std::vector<atl::parallel::FlatEntry> entries;  // where each parameter sits in final_params
  double val_loss = 0.0;
};

RunResult train(const Config& config, const atl::comm::MpiCommunicator& comm) {
  Trainer trainer(config, comm, nullptr);
  RunResult result;
  for (int s = 0; s < config.train.steps; ++s) {
    const atl::runtime::StepMetrics m = trainer.train_step();
    result.losses.push_back(m.loss);
    result.grad_norms.push_back(m.grad_norm);
    if (s == 0) result.first_step_grads = trainer.parameters().grads().clone();
  }
  result.final_params = trainer.parameters().values().clone();
  result.entries = trainer.parameters().entries();
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
  for (size_t s = 0; s < dp.grad_norms.size(); ++s)
    EXPECT_NEAR(dp.grad_norms[s], reference.grad_norms[s], 1e-5 * reference.grad_norms[s])
        << "step " << s + 1;
  EXPECT_LT(dp.losses.back(), dp.losses.front() - 0.5) << "the loss should fall";
  EXPECT_LT(max_relative(dp.first_step_grads, reference.first_step_grads), 1e-5);
  // Parameters: relative L2 error of every tensor. (Elementwise, AdamW's m/sqrt(v) turns 1e-7
  // rounding noise in near-zero gradients into visible differences of single elements, which a
  // per-tensor norm weighs for what they are.)
  for (const atl::parallel::FlatEntry& e : reference.entries) {
    const at::Tensor ours = dp.final_params.narrow(0, e.offset, e.numel);
    const at::Tensor theirs = reference.final_params.narrow(0, e.offset, e.numel);
    const double error = ((ours - theirs).norm() / theirs.norm()).item<double>();
    EXPECT_LT(error, 1e-5) << e.info.name;
  }
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
  config.optim.grad_clip = 0.0;  // unclipped, so the gradients compared are the raw dp average
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
