// Resharding on 8 ranks: a checkpoint saved under TP=2 x PP=2 x DP=2 with ZeRO-1 loads under
// another layout -- 1 rank, TP=4 x DP=2, PP=4 x DP=2, DP=4 x TP=2 with ZeRO-3 -- and saving it again
// from there gives back every tensor (parameters and both AdamW moments) bit for bit; training then
// goes on with the losses of the original layout (within 1e-4 over 5 steps).
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/consolidated.h"
#include "tests/parity_harness.h"

namespace {

using atl::runtime::Config;
using atl::runtime::Trainer;
namespace proto = atl::checkpoint::proto;

Config with_layout(Config c, int tp, int pp, int dp, int zero) {
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.parallel.zero = zero;
  c.parallel.microbatches = pp > 1 ? 2 : 1;
  return c;
}

// Every tensor of every role of two checkpoints, compared bitwise (on the calling rank).
void expect_same_tensors(const std::string& a, const std::string& b) {
  for (proto::Role role : {proto::PARAM, proto::EXP_AVG, proto::EXP_AVG_SQ}) {
    const auto ours = atl::checkpoint::consolidated(a, role), theirs = atl::checkpoint::consolidated(b, role);
    ASSERT_EQ(ours.size(), theirs.size());
    for (const auto& [name, value] : theirs)
      EXPECT_TRUE(ours.at(name).equal(value)) << name << " (" << atl::checkpoint::role_name(role) << ")";
  }
}

TEST(Resharding, EveryLayoutReadsTheSameStateAndTrainsOn) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  ASSERT_EQ(world->size(), 8);
  Config base = atl::test::tiny_config(atl::test::write_synthetic_dataset("reshard"));
  base.run.dir = atl::test::from_rank0(*world, base.run.dir);
  base.model.layers = 4;
  base.model.heads = base.model.kv_heads = 4;
  base.train.steps = 3;
  base.checkpoint.resume = "none";
  Config saved = with_layout(base, 2, 2, 2, 1);
  Trainer original(saved, *world, nullptr);
  for (int s = 0; s < saved.train.steps; ++s) original.train_step();
  const std::string checkpoint = original.save_checkpoint();
  std::vector<double> continued;
  for (int s = 0; s < 5; ++s) continued.push_back(original.train_step().loss);

  const auto reload = [&](Config config, atl::comm::MpiCommunicator& comm, const std::string& tag) {
    config.checkpoint.resume = checkpoint;
    config.run.dir = base.run.dir + "-" + tag;
    Trainer trainer(config, comm, nullptr);
    EXPECT_EQ(trainer.step(), saved.train.steps) << tag;
    const std::string again = trainer.save_checkpoint();
    if (comm.rank() == 0) expect_same_tensors(again, checkpoint);
    for (int s = 0; s < 5; ++s)
      EXPECT_NEAR(trainer.train_step().loss, continued[s], 1e-4 * continued[s]) << tag;
  };
  reload(with_layout(base, 4, 1, 2, 0), *world, "tp4");
  reload(with_layout(base, 1, 4, 2, 0), *world, "pp4");
  reload(with_layout(base, 2, 1, 4, 3), *world, "dp4-zero3");
  if (world->rank() == 0) {  // one rank alone
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    atl::comm::MpiCommunicator alone(atl::test::MpiTestEnv::runtime(), self, "self");
    reload(with_layout(base, 1, 1, 1, 0), alone, "one-rank");
  }
  world->barrier();
}

}  // namespace
