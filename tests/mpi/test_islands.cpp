// Islands (DESIGN §6): every launched rank is one island unless a test says otherwise.
//  - Oracles on the outer optimizer with real autograd and real exchanges: H=1 with inner SGD and
//    outer SGD(1, 0) is synchronous data parallelism; outer SGD(1, 0) is parameter averaging;
//    NoLoCo with a=b=0, g=1 makes gossip partners equal their mean.
//  - The trainer: one island is the Lookahead optimizer; islands averaging every step equal data parallelism;
//  all
//    islands are bit-identical after a sync under every codec; Streaming DiLoCo with P=1, tau=0,
//    alpha=0 is DiLoCo; fragments sync at their own steps; islands compose with TP, PP and ZeRO; a
//    sync leaves the inner AdamW moments untouched; outer
//    bytes are H times fewer than synchronous training's (4x fewer again in int8).
//  - Checkpoints: resume mid-round and with an exchange in flight is bitwise the run straight
//    through; a checkpoint of k islands loads into another count.
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>

#include "checkpoint/consolidated.h"
#include "optim/outer/island_exchange.h"
#include "optim/outer/outer_optimizer.h"
#include "tests/parity_harness.h"

namespace {

using atl::optim::outer::Codec;
using atl::runtime::Config;
using atl::runtime::name_of;
using atl::runtime::OuterAlgorithm;
using atl::runtime::Trainer;
using atl::test::world_size;
namespace outer = atl::optim::outer;

class Islands : public ::testing::Test {
 protected:
  atl::comm::MpiCommunicator& world() { return *world_; }
  // The tiny config with one island per launched rank, in a run directory shared by the job.
  Config islands_config(const std::string& tag, OuterAlgorithm algorithm) {
    Config c = atl::test::layout(tag, 1);
    c.run.dir = atl::test::from_rank0(world(), c.run.dir);
    c.parallel.dp = 1;
    c.parallel.islands = world_size();
    c.outer.algorithm = algorithm;
    c.outer.inner_steps = 4;
    c.train.steps = 8;
    c.train.global_batch = 8;
    c.checkpoint.resume = "none";
    return c;
  }

 private:
  std::shared_ptr<atl::comm::MpiCommunicator> world_ = atl::test::MpiTestEnv::runtime().world();
};

// Every rank's copy of `t` equals rank 0's to the last bit (compared on the host: the outer
// optimizer's state lives on the GPU in a GPU run, and MPI carries host memory).
bool same_on_every_rank(atl::comm::MpiCommunicator& comm, const at::Tensor& t) {
  const at::Tensor mine = t.cpu();
  at::Tensor first = mine.contiguous().clone();
  comm.broadcast(first, 0)->wait();
  int equal = first.equal(mine) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &equal, 1, MPI_INT, MPI_MIN, comm.handle());
  return equal == 1;
}

// A least-squares model whose gradient each island computes with autograd on its own data.
struct Regression {
  at::Tensor x, y;
  explicit Regression(int island) {
    at::manual_seed(100 + island);
    x = at::randn({16, 8});
    y = at::randn({16, 1});
  }
  at::Tensor gradient(const at::Tensor& w) const {
    at::Tensor p = w.detach().clone().requires_grad_(true);
    at::mse_loss(at::matmul(x, p.view({8, 1})), y).backward();
    return p.grad();
  }
};

TEST_F(Islands, H1InnerSgdOuterSgdOneZeroIsSynchronousDataParallelism) {
  outer::IslandExchange exchange(world(), outer::Codec::kNone, {});
  at::manual_seed(1);
  const at::Tensor w0 = at::randn({8});
  at::Tensor theta = w0.clone(), sync_w = w0.clone();
  outer::OuterOptions options;
  options.algorithm = outer::Algorithm::kDiLoCo;
  options.inner_steps = 1;
  options.lr = 1.0;
  options.momentum = 0.0;
  options.nesterov = false;
  outer::OuterOptimizer diloco(options, {theta}, {{{0, 8}}}, exchange);
  const Regression data(world().rank());
  const double lr = 0.05;
  for (int64_t step = 1; step <= 5; ++step) {
    theta.sub_(data.gradient(theta), lr);  // inner SGD
    EXPECT_TRUE(diloco.after_inner_step(step));
    // Synchronous data parallelism: the mean gradient.
    at::Tensor g = data.gradient(sync_w);
    world().all_reduce(g, atl::comm::ReduceOp::kAvg)->wait();
    sync_w.sub_(g, lr);
    EXPECT_TRUE(at::allclose(theta, sync_w, 1e-6, 1e-7)) << "step " << step;
  }
  EXPECT_FALSE(at::allclose(theta, w0)) << "training moved the weights";
}

TEST_F(Islands, OuterSgdOneZeroIsParameterAveraging) {
  outer::IslandExchange exchange(world(), outer::Codec::kNone, {});
  at::manual_seed(2);
  at::Tensor theta = at::randn({40});
  outer::OuterOptions options;
  options.algorithm = outer::Algorithm::kDiLoCo;
  options.inner_steps = 3;
  options.lr = 1.0;
  options.momentum = 0.0;
  options.nesterov = true;
  outer::OuterOptimizer diloco(options, {theta.narrow(0, 0, 25), theta.narrow(0, 25, 15)},
                               {{{0, 25}, {25, 15}}}, exchange);
  at::manual_seed(10 + world().rank());
  for (int64_t step = 1; step <= 6; ++step) {
    theta.add_(at::randn({40}) * 0.1);  // each island wanders its own way
    at::Tensor mean = theta.clone();
    world().all_reduce(mean, atl::comm::ReduceOp::kAvg)->wait();
    const bool synced = diloco.after_inner_step(step);
    EXPECT_EQ(synced, step % 3 == 0);
    if (synced) {
      EXPECT_TRUE(at::allclose(theta, mean, 1e-6, 1e-6)) << "step " << step;
      EXPECT_TRUE(same_on_every_rank(world(), theta));
      EXPECT_TRUE(diloco.phi().equal(theta));
    }
  }
}

ATOLL_RUNS_AT(Islands, NoLoCoPartnersMeetTheirMeanWithoutAGlobalCollective, 4);
TEST_F(Islands, NoLoCoPartnersMeetTheirMeanWithoutAGlobalCollective) {
  outer::IslandExchange exchange(world(), outer::Codec::kNone, {});
  at::manual_seed(30 + world().rank());
  at::Tensor theta = at::randn({16});
  outer::OuterOptions options;
  options.algorithm = outer::Algorithm::kNoLoCo;
  options.inner_steps = 1;
  // a = b = 0, g = 1: phi becomes the group mean.
  options.lr = 0.0;
  options.momentum = 0.0;
  options.gamma = 1.0;
  outer::OuterOptimizer noloco(options, {theta}, {{{0, 16}}}, exchange, /*gossip_seed=*/5);
  at::Tensor before = at::empty({world_size(), 16});
  world().all_gather(noloco.phi().clone(), before.view({-1}))->wait();
  ASSERT_TRUE(noloco.after_inner_step(1));
  at::Tensor after = at::empty({world_size(), 16});
  world().all_gather(theta.clone(), after.view({-1}))->wait();
  const auto groups = outer::gossip_groups(world_size(), 2, 5, 1);
  for (const auto& group : groups) {
    at::Tensor mean = at::zeros({16});
    for (int i : group) mean += before[i] / static_cast<double>(group.size());
    for (int i : group) EXPECT_TRUE(at::allclose(after[i], mean, 1e-6, 1e-6)) << "island " << i;
  }
  EXPECT_FALSE(after[groups[0][0]].equal(after[groups[1][0]])) << "groups do not mix";
  // The pairing every rank computed is the same (no message decided it).
  at::Tensor mine = at::tensor(std::vector<int>{groups[0][0], groups[0][1]});
  EXPECT_TRUE(same_on_every_rank(world(), mine));
}

TEST_F(Islands, NonFiniteValuesStopEveryIslandWithOneLine) {
  outer::IslandExchange exchange(world(), outer::Codec::kInt8, {});
  at::Tensor values = at::ones({300});
  if (world().rank() == world_size() - 1) values[7] = std::numeric_limits<float>::quiet_NaN();
  try {
    exchange.mean(values);
    ADD_FAILURE() << "a NaN went through the exchange";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("island " + std::to_string(world_size() - 1) + " has non-finite"),
              std::string::npos)
        << e.what();
  }
}

// Elastic islands: an island catching up sends zeros whatever its values, and the mean is over the others.
TEST_F(Islands, IslandsCatchingUpAreLeftOutOfTheMeansDivisor) {
  outer::IslandExchange exchange(world(), outer::Codec::kNone, {});
  const int k = world_size(), catching_up = k - 1;
  const at::Tensor own = at::arange(301, at::kFloat).mul_(0.01 * (world().rank() + 1)).sin_();
  const at::Tensor values = world().rank() == catching_up ? at::zeros({301}) : own;
  std::vector<int> contributors(static_cast<size_t>(k - 1));
  std::iota(contributors.begin(), contributors.end(), 0);
  exchange.set_contributors(contributors);
  EXPECT_EQ(exchange.contributors(), contributors);
  const at::Tensor mean = exchange.mean(own);
  // Every contributor's values, summed in island order, over k - 1.
  at::Tensor expected = at::zeros({301});
  for (int i = 0; i < catching_up; ++i)
    expected.add_(at::arange(301, at::kFloat).mul_(0.01 * (i + 1)).sin_());
  expected.div_(k - 1);
  EXPECT_TRUE(at::allclose(mean, expected, 1e-6, 1e-6)) << (mean - expected).abs().max().item<float>();
  EXPECT_TRUE(same_on_every_rank(world(), mean));
  exchange.set_contributors({});  // back to every island
  EXPECT_TRUE(at::allclose(exchange.mean(values), expected * (k - 1) / k, 1e-6, 1e-6));
}

// The pseudo-gradient norm bound: the islands agree on each other's norms, and those over the bound
// send zeros and are left out of the divisor -- on every island alike.
TEST_F(Islands, IslandsOverTheNormBoundAreLeftOutOfTheMean) {
  outer::IslandExchange exchange(world(), outer::Codec::kNone, {});
  const int k = world_size(), poisoned = k - 1;
  auto values_of = [](int island) { return at::arange(301, at::kFloat).mul_(0.01 * (island + 1)).cos_(); };
  const double norm = world().rank() == poisoned ? 1000.0 : 1.0 + world().rank();
  exchange.bound_norms(10.0);
  const at::Tensor mean = exchange.mean(values_of(world().rank()), norm);
  at::Tensor expected = at::zeros({301});
  for (int i = 0; i < poisoned; ++i) expected.add_(values_of(i));
  expected.div_(k - 1);
  EXPECT_TRUE(at::allclose(mean, expected, 1e-6, 1e-6)) << (mean - expected).abs().max().item<float>();
  EXPECT_TRUE(same_on_every_rank(world(), mean));
  ASSERT_EQ(exchange.left_out().size(), 1u);
  EXPECT_EQ(exchange.left_out()[0].island, poisoned);
  EXPECT_EQ(exchange.left_out()[0].norm, 1000.0);
  // Every norm within the bound: everyone's values count.
  const at::Tensor all = exchange.mean(values_of(world().rank()), 1.0);
  EXPECT_TRUE(exchange.left_out().empty());
  EXPECT_TRUE(at::allclose(all, (expected * (k - 1) + values_of(poisoned)) / k, 1e-6, 1e-6));
}

// `c` with each island on 2 ranks: `inner` is tp (with SP), zero (DP=2 ZeRO-1) or pp.
Config in_two_ranks(Config c, const std::string& inner) {
  if (inner == "zero") {
    c.parallel.dp = 2;
    c.parallel.zero = 1;
  } else if (inner == "pp") {
    c.parallel.pp = 2;
    c.parallel.microbatches = 2;
  } else {
    c.parallel.tp = 2;
    c.parallel.sequence_parallel = true;
  }
  return c;
}

// island_left_out events in a run's metrics.jsonl: "STEP ISLAND" -> the norm.
std::map<std::string, double> left_out_events(const std::string& run_dir) {
  std::map<std::string, double> events;
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  const std::regex event(
      R"re("event":"island_left_out","step":(\d+),"island":(\d+),"pseudo_grad_norm":([^,}]+))re");
  std::smatch m;
  for (std::string line; std::getline(metrics, line);)
    if (std::regex_search(line, m, event)) events[m[1].str() + " " + m[2].str()] = std::stod(m[3].str());
  return events;
}

// The bound measures an island's whole pseudo-gradient, each element once, whatever its layout:
// 2 islands of TP=2 (+SP), of DP=2 ZeRO-1 and of PP=2 see the norms that 2 one-rank islands see,
// and a bound between the two islands' norms leaves out the longer one only, on both islands.
ATOLL_RUNS_AT(Islands, TheNormBoundMeasuresWholeIslandsInEveryLayout, 4);
TEST_F(Islands, TheNormBoundMeasuresWholeIslandsInEveryLayout) {
  Config c = islands_config("islands-bound", OuterAlgorithm::kDiLoCo);
  c.parallel.islands = 2;
  c.outer.inner_steps = 3;
  c.train.steps = 6;
  c.outer.max_pseudo_grad_norm = 1e-9;  // every island left out: each round's norms all logged
  // The same 2 one-rank islands on each half of the world, each half in its own run directory.
  const std::string half_tag = "-half" + std::to_string(world().rank() % 2);
  Config reference = c;
  reference.run.dir += "-reference" + half_tag;
  auto half = world().split(world().rank() % 2, world().rank(), "half");
  atl::test::train(reference, *half);
  world().barrier();
  const std::map<std::string, double> expected = left_out_events(reference.run.dir);
  ASSERT_EQ(expected.size(), 4u) << "2 rounds x 2 islands";
  for (const std::string inner : {"tp", "zero", "pp"}) {
    Config ours = in_two_ranks(c, inner);
    ours.run.dir += "-" + inner;
    atl::test::train(ours, world());
    world().barrier();
    const std::map<std::string, double> seen = left_out_events(ours.run.dir);
    ASSERT_EQ(seen.size(), expected.size()) << inner;
    for (const auto& [key, norm] : expected) {
      ASSERT_TRUE(seen.count(key)) << inner << ": no event for step, island " << key;
      EXPECT_NEAR(seen.at(key), norm, 1e-5 * norm) << inner << ": step, island " << key;
    }
  }
  // A bound between the two islands' first-round norms: only the longer one is left out there.
  const double norm0 = expected.at("3 0"), norm1 = expected.at("3 1");
  ASSERT_NE(norm0, norm1);
  Config between = c;
  between.run.dir += "-between" + half_tag;
  between.outer.max_pseudo_grad_norm = (norm0 + norm1) / 2;
  const auto run = atl::test::train(between, *half);
  world().barrier();
  const std::map<std::string, double> seen = left_out_events(between.run.dir);
  const std::string longer = norm0 > norm1 ? "3 0" : "3 1", shorter = norm0 > norm1 ? "3 1" : "3 0";
  EXPECT_TRUE(seen.count(longer)) << "the longer pseudo-gradient was averaged in";
  EXPECT_FALSE(seen.count(shorter)) << "the shorter pseudo-gradient was left out";
  // Both islands still apply the same mean: bit-identical after the last sync.
  for (const auto& [name, piece] : run.final_params) EXPECT_TRUE(same_on_every_rank(world(), piece)) << name;
}

TEST_F(Islands, OneIslandIsTheLookaheadOptimizer) {
  // DiLoCo with one island (over dp = world ranks) is Lookahead: after H inner steps from phi0 to
  // theta, phi = phi0 + lr * (theta - phi0) and theta restarts there.
  Config plain = islands_config("islands-one", OuterAlgorithm::kNone);
  plain.train.steps = 3;
  plain.parallel.islands = 1;
  plain.parallel.dp = world_size();
  Config lookahead = plain;
  lookahead.outer.algorithm = OuterAlgorithm::kDiLoCo;
  lookahead.outer.inner_steps = 3;
  lookahead.outer.lr = 0.5;
  lookahead.outer.momentum = 0.0;
  lookahead.run.dir += "-lookahead";
  Trainer inner_only(plain, world(), nullptr);
  const auto phi0 = atl::test::on_host(inner_only.full_parameters());
  for (int s = 0; s < plain.train.steps; ++s) inner_only.train_step();
  const auto theta = atl::test::on_host(inner_only.full_parameters());
  Trainer trainer(lookahead, world(), nullptr);
  for (int s = 0; s < lookahead.train.steps; ++s) trainer.train_step();
  const auto after_sync = atl::test::on_host(trainer.full_parameters());
  ASSERT_EQ(after_sync.size(), phi0.size());
  for (const auto& [name, start] : phi0) {
    const at::Tensor expected = start + 0.5 * (theta.at(name) - start);
    EXPECT_TRUE(after_sync.at(name).allclose(expected, 1e-5, 1e-6)) << name;
    EXPECT_GT((theta.at(name) - start).abs().max().item<double>(), 1e-4) << name << " did not train";
  }
  // The outer parameters are the ones evaluated: phi moved (no stale initial model is reported).
  EXPECT_DOUBLE_EQ(trainer.evaluate_outer(), trainer.evaluate());
  EXPECT_LT(trainer.evaluate_outer(), Trainer(plain, world(), nullptr).evaluate() - 0.05);
}

TEST_F(Islands, IslandsAveragingEveryStepAreDataParallelism) {
  Config sync = islands_config("islands-sync", OuterAlgorithm::kNone);
  sync.train.steps = 20;
  Config dp = sync;
  dp.parallel.islands = 1;
  dp.parallel.dp = world_size();
  dp.run.dir += "-dp";
  const auto ours = atl::test::train(sync, world());
  atl::test::expect_runs_agree(ours, atl::test::train(dp, world()), {1e-6, 1e-5, 1e-6, false});
  for (const auto& [name, piece] : ours.final_params) EXPECT_TRUE(same_on_every_rank(world(), piece)) << name;
}

TEST_F(Islands, EveryCodecLeavesIslandsBitIdenticalAfterASync) {
  for (const Codec compression : {Codec::kNone, Codec::kFp16, Codec::kBf16, Codec::kInt8, Codec::kInt4}) {
    const std::string codec = atl::optim::outer::codec_name(compression);
    Config c = islands_config("islands-codec-" + codec, OuterAlgorithm::kDiLoCo);
    c.outer.compression = compression;
    c.outer.inner_steps = 3;
    c.train.steps = 6;
    Trainer trainer(c, world(), nullptr);
    std::vector<double> losses;
    for (int s = 0; s < c.train.steps; ++s) losses.push_back(trainer.train_step().loss);
    EXPECT_LT(losses.back(), losses.front() - 0.3) << codec;
    for (const auto& [name, piece] : atl::test::on_host(trainer.full_parameters()))
      EXPECT_TRUE(same_on_every_rank(world(), piece)) << codec << " " << name;
    EXPECT_TRUE(same_on_every_rank(world(), trainer.outer_optimizer()->phi())) << codec;
    EXPECT_TRUE(same_on_every_rank(world(), trainer.outer_optimizer()->momentum())) << codec;
  }
}

TEST_F(Islands, StreamingWithOneFragmentNoDelayNoMixIsDiLoCo) {
  Config diloco = islands_config("islands-streaming-p1", OuterAlgorithm::kDiLoCo);
  diloco.train.steps = 20;
  Config streaming = diloco;
  streaming.outer.algorithm = OuterAlgorithm::kStreamingDiLoCo;
  streaming.outer.mix = 0.0;
  streaming.run.dir += "-streaming";
  atl::test::expect_runs_agree(atl::test::train(streaming, world()), atl::test::train(diloco, world()),
                               {0, 0, 0, true});
}

TEST_F(Islands, SparseLoCoKeepingEveryElementIsDiLoCo) {
  // k = 256 of 256 with exact values: the sparse all-to-all carries everything, the error feedback
  // stays zero, and the run is DiLoCo's (reduce-scatter) bit for bit.
  Config diloco = islands_config("islands-sparse-all", OuterAlgorithm::kDiLoCo);
  diloco.train.steps = 20;
  Config sparse = diloco;
  sparse.outer.topk = static_cast<int>(outer::kTopkChunk);
  sparse.run.dir += "-sparse";
  atl::test::expect_runs_agree(atl::test::train(sparse, world()), atl::test::train(diloco, world()),
                               {0, 0, 0, true});
}

TEST_F(Islands, SparseLoCoSendsFewerBytesAndLeavesIslandsBitIdentical) {
  Config c = islands_config("islands-sparse", OuterAlgorithm::kDiLoCo);
  c.outer.topk = 4;
  c.outer.compression = Codec::kInt8;
  Trainer trainer(c, world(), nullptr);
  uint64_t sent = 0;
  for (int s = 0; s < c.train.steps; ++s) sent = trainer.train_step().outer_bytes_total;
  for (const auto& [name, piece] : atl::test::on_host(trainer.full_parameters()))
    EXPECT_TRUE(same_on_every_rank(world(), piece)) << name;
  // As atoll plan predicts: 2 syncs, each one message of 4/256 of the model to every other island
  // (plus the finiteness votes).
  const double per_sync = atl::launcher::make_plan(c).stages[0].outer_bytes_per_sync;
  if (world_size() > 1) {
    EXPECT_NEAR(static_cast<double>(sent) / (2 * per_sync), 1.0, 0.05) << sent;
  }
  // Each island keeps its own feedback: what it did not send differs from the others'.
  const at::Tensor& feedback = trainer.outer_optimizer()->error_feedback();
  EXPECT_GT(feedback.abs().sum().item<double>(), 0.0);
  if (world_size() > 1) {
    EXPECT_FALSE(same_on_every_rank(world(), feedback));
  }
}

TEST_F(Islands, StreamingFragmentsSyncAtTheirOwnSteps) {
  // 2 layers, P = 2, H = 4: fragment 0 (embedding, layer 0) syncs after step 2, fragment 1 (layer 1,
  // norm, head) after step 4.
  Config c = islands_config("islands-fragments", OuterAlgorithm::kStreamingDiLoCo);
  c.outer.fragments = 2;
  c.outer.mix = 0.0;
  Trainer trainer(c, world(), nullptr);
  const auto in_fragment0 = [](const std::string& name) {
    return name.rfind("model.layers.0.", 0) == 0 || name == "model.embed_tokens.weight";
  };
  for (int step = 1; step <= 4; ++step) {
    trainer.train_step();
    for (const auto& [name, piece] : atl::test::on_host(trainer.full_parameters())) {
      const bool synced = in_fragment0(name) ? step == 2 : step == 4;
      // Before its first sync a fragment differs between islands; right after, it is identical.
      const bool identical = same_on_every_rank(world(), piece);
      if (synced) {
        EXPECT_TRUE(identical) << "step " << step << " " << name;
      } else {
        EXPECT_FALSE(identical) << "step " << step << " " << name;
      }
    }
  }
}

ATOLL_RUNS_AT(Islands, ComposeWithTensorParallelismAndZero, 4);
TEST_F(Islands, ComposeWithTensorParallelismAndZero) {
  for (const std::string inner : {"tp", "zero", "pp"}) {
    Config c = islands_config("islands-" + inner, OuterAlgorithm::kDiLoCo);
    c.parallel.islands = 2;
    c.outer.inner_steps = 3;
    c.train.steps = 6;
    Config reference = c;  // 2 islands of one rank each, on each half of the world
    reference.run.dir += "-reference";
    c = in_two_ranks(c, inner);
    auto half = world().split(world().rank() % 2, world().rank(), "half");
    const auto expected = atl::test::train(reference, *half);
    const auto ours = atl::test::train(c, world());
    for (size_t s = 0; s < ours.losses.size(); ++s)
      EXPECT_NEAR(ours.losses[s], expected.losses[s], 1e-5 * expected.losses[s]) << "step " << s + 1;
    atl::test::expect_pieces_match(c, inner == "tp" ? world().rank() % 2 : 0, ours.final_params,
                                   expected.final_params, "parameter after 6 steps");
  }
}

TEST_F(Islands, ASyncLeavesTheInnerAdamWMomentsUntouched) {
  // The same 4 steps twice: syncing after step 4, and never (H beyond the run). Island 0's saved
  // AdamW moments are bitwise equal; its parameters are not (the sync moved them).
  const auto saved_after_four = [&](const std::string& tag, int inner_steps) {
    Config c = islands_config("islands-moments-" + tag, OuterAlgorithm::kDiLoCo);
    c.outer.inner_steps = inner_steps;
    c.train.steps = 4;
    c.checkpoint.dir = c.run.dir + "/ckpt";
    Trainer trainer(c, world(), nullptr);
    for (int s = 0; s < 4; ++s) trainer.train_step();
    return trainer.save_checkpoint();
  };
  const std::string synced = saved_after_four("synced", 4), alone = saved_after_four("alone", 1000);
  for (const auto role : {atl::checkpoint::proto::EXP_AVG, atl::checkpoint::proto::EXP_AVG_SQ}) {
    const auto a = atl::checkpoint::consolidated(synced, role),
               b = atl::checkpoint::consolidated(alone, role);
    for (const auto& [name, moment] : a) EXPECT_TRUE(moment.equal(b.at(name))) << name;
  }
  const auto a = atl::checkpoint::consolidated(synced, atl::checkpoint::proto::PARAM),
             b = atl::checkpoint::consolidated(alone, atl::checkpoint::proto::PARAM);
  EXPECT_FALSE(a.at("model.layers.0.mlp.up_proj.weight").equal(b.at("model.layers.0.mlp.up_proj.weight")));
}

TEST_F(Islands, OuterBytesAreHTimesFewerAndInt8FourTimesFewerAgain) {
  const auto outer_bytes = [&](OuterAlgorithm algorithm, Codec codec) {
    Config c = islands_config(
        "islands-bytes-" + std::string(name_of(algorithm)) + atl::optim::outer::codec_name(codec), algorithm);
    c.outer.inner_steps = 4;
    c.outer.compression = codec;
    Trainer trainer(c, world(), nullptr);
    uint64_t total = 0;
    for (int s = 0; s < c.train.steps; ++s) total = trainer.train_step().outer_bytes_total;
    return static_cast<double>(total);
  };
  const double sync = outer_bytes(OuterAlgorithm::kNone, Codec::kNone),
               diloco = outer_bytes(OuterAlgorithm::kDiLoCo, Codec::kNone),
               int8 = outer_bytes(OuterAlgorithm::kDiLoCo, Codec::kInt8);
  EXPECT_NEAR(sync / diloco, 4.0, 0.01) << sync << " vs " << diloco;
  // atoll plan predicts it: 2 syncs of 2(k-1)/k of the fp32 model (within the vote and padding).
  Config planned = islands_config("islands-bytes-plan", OuterAlgorithm::kDiLoCo);
  planned.outer.inner_steps = 4;
  const double per_sync = atl::launcher::make_plan(planned).stages[0].outer_bytes_per_sync;
  EXPECT_NEAR(diloco / (2 * per_sync), 1.0, 0.01) << diloco << " vs plan " << 2 * per_sync;
  EXPECT_NEAR(diloco / int8, 4.0 / (1.0 + 8.0 / 256), 0.1) << diloco << " vs " << int8;
}

// Trains `steps` steps of `config` (resuming if it says so) and returns the losses and parameters.
struct Trained {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> params;
  at::Tensor phi;
};
Trained run(const Config& config, atl::comm::MpiCommunicator& comm, int steps, bool save_at_end) {
  Trainer trainer(config, comm, nullptr);
  Trained out;
  for (int s = 0; s < steps; ++s) out.losses.push_back(trainer.train_step().loss);
  if (save_at_end) trainer.save_checkpoint();
  out.params = atl::test::on_host(trainer.full_parameters());
  out.phi = trainer.outer_optimizer()->phi().clone();
  return out;
}

TEST_F(Islands, ResumeMidRoundAndInFlightIsBitwiseTheRunStraightThrough) {
  struct Variant {
    std::string name;
    std::function<void(Config&)> set;
    int save_after;
  };
  const std::vector<Variant> variants{
      {"diloco-mid-round", [](Config&) {}, 6},
      {"delayed", [](Config& c) { c.outer.delayed = true; }, 6},
      {"streaming-in-flight",
       [](Config& c) {
         c.outer.algorithm = OuterAlgorithm::kStreamingDiLoCo;
         c.outer.fragments = 2;
         c.outer.delay = 1;
       },
       6},
      {"noloco", [](Config& c) { c.outer.algorithm = OuterAlgorithm::kNoLoCo; }, 5},
      // The error feedback left by round 1 shapes rounds 2 and 3: it must come back exactly.
      {"sparseloco-mid-round",
       [](Config& c) {
         c.outer.topk = 4;
         c.outer.compression = Codec::kInt8;
       },
       6},
      {"sparseloco-streaming-in-flight",
       [](Config& c) {
         c.outer.algorithm = OuterAlgorithm::kStreamingDiLoCo;
         c.outer.fragments = 2;
         c.outer.delay = 1;
         c.outer.topk = 8;
       },
       6},
  };
  for (const Variant& v : variants) {
    Config c = islands_config("islands-resume-" + v.name, OuterAlgorithm::kDiLoCo);
    c.train.steps = 12;
    v.set(c);
    const Trained straight = run(c, world(), 12, false);
    Config first = c;
    first.run.dir += "-resumed";
    first.checkpoint.dir = first.run.dir + "/ckpt";
    run(first, world(), v.save_after, true);
    Config second = first;
    second.checkpoint.resume = "auto";
    const Trained resumed = run(second, world(), 12 - v.save_after, false);
    for (int s = 0; s < 12 - v.save_after; ++s)
      EXPECT_EQ(resumed.losses[s], straight.losses[v.save_after + s]) << v.name << " step " << s + 1;
    for (const auto& [name, piece] : straight.params)
      EXPECT_TRUE(resumed.params.at(name).equal(piece)) << v.name << " " << name;
    EXPECT_TRUE(resumed.phi.equal(straight.phi)) << v.name;
  }
}

ATOLL_RUNS_AT(Islands, CheckpointOfKIslandsLoadsIntoAnotherCount, 2);
TEST_F(Islands, CheckpointOfKIslandsLoadsIntoAnotherCount) {
  Config c = islands_config("islands-reshape", OuterAlgorithm::kDiLoCo);
  c.checkpoint.dir = c.run.dir + "/ckpt";
  c.train.eval_sequences = 8;
  double island0_theta = 0, phi_loss = 0, first_loss = 0;
  {
    Trainer trainer(c, world(), nullptr);
    first_loss = trainer.train_step().loss;
    for (int s = 1; s < 6; ++s) trainer.train_step();  // mid-round: theta differs from phi
    trainer.save_checkpoint();
    island0_theta = trainer.evaluate();  // each island evaluates its own theta; rank 0 is island 0
    phi_loss = trainer.evaluate_outer();
  }
  MPI_Bcast(&island0_theta, 1, MPI_DOUBLE, 0, world().handle());
  Config one = c;
  one.parallel.islands = 1;
  one.parallel.dp = 2;
  one.parallel.zero = 1;
  one.checkpoint.resume = "auto";
  Trainer resumed(one, world(), nullptr);
  EXPECT_EQ(resumed.step(), 6);
  // Island 0's theta and the shared phi come back, resharded over dp = 2.
  EXPECT_NEAR(resumed.evaluate(), island0_theta, 1e-6 * island0_theta);
  EXPECT_NEAR(resumed.evaluate_outer(), phi_loss, 1e-6 * phi_loss);
  // And it trains on from there: the next step's loss is that of a trained model, well below the
  // untrained model's first (a fresh start would be back near it).
  const double next_loss = resumed.train_step().loss;
  EXPECT_LT(next_loss, first_loss - 0.5) << "first step " << first_loss;
}

}  // namespace
