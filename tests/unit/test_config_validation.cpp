// Experiment configs: the contract YAML, overrides, and one clear line per bad input.
#include <gtest/gtest.h>

#include "runtime/config.h"

using atl::runtime::Config;
using atl::runtime::ConfigError;
using atl::runtime::parse_config;

namespace {

const char* kContract = R"(
run:      { dir: runs/NAME, seed: 1234 }
model:    { vocab: 256, dim: 256, layers: 4, heads: 8, kv_heads: 8, ffn: 688, seq: 256, tie_embeddings: false }
parallel: { islands: 1, pp: 1, dp: 2, tp: 1, zero: 0, microbatches: 1, schedule: 1f1b, virtual_stages: 1 }
train:    { steps: 200, global_batch: 16, log_every: 10, eval_every: 50 }
optim:    { lr: 3.0e-4, min_lr: 3.0e-5, warmup: 20, betas: [0.9, 0.95], weight_decay: 0.1, grad_clip: 1.0 }
data:     { train: data/brown/train.bin, val: data/brown/val.bin }
)";

// The problems parse_config reports for `yaml` with `overrides` (empty when it parses).
std::vector<std::string> problems_of(const std::string& yaml,
                                     const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, overrides);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

void expect_problem(const std::vector<std::string>& problems, const std::vector<std::string>& fragments) {
  ASSERT_EQ(problems.size(), 1u) << (problems.empty() ? "no problem reported" : problems[0]);
  for (const std::string& f : fragments)
    EXPECT_NE(problems[0].find(f), std::string::npos) << problems[0] << " lacks " << f;
}

}  // namespace

TEST(Config, ContractYamlParses) {
  const Config c = parse_config(kContract);
  EXPECT_EQ(c.run.dir, "runs/NAME");
  EXPECT_EQ(c.run.seed, 1234);
  EXPECT_EQ(c.model.ffn, 688);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_EQ(c.parallel.dp, 2);
  EXPECT_EQ(c.parallel.schedule, "1f1b");
  EXPECT_EQ(c.train.eval_every, 50);
  EXPECT_DOUBLE_EQ(c.optim.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.95);
  EXPECT_EQ(c.data.val, "data/brown/val.bin");
}

TEST(Config, EmptyTextGivesDefaults) {
  const Config c = parse_config("");
  EXPECT_EQ(c.model.dim, 256);
  EXPECT_EQ(c.parallel.dp, 1);
  EXPECT_EQ(c.optim.schedule, "cosine");
}

TEST(Config, OverridesApplyAsYamlValues) {
  const Config c = parse_config(kContract, {"optim.lr=1e-3", "optim.betas=[0.8, 0.99]", "parallel.dp=4"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.99);
  EXPECT_EQ(c.parallel.dp, 4);
  // An override may create a section the file does not have.
  EXPECT_EQ(parse_config("model: {dim: 64}", {"train.steps=7"}).train.steps, 7);
}

TEST(Config, UnknownKeysAndSectionsSuggestTheClosestName) {
  expect_problem(problems_of("model: {dimm: 128}"), {"unknown key 'model.dimm'", "did you mean 'dim'"});
  expect_problem(problems_of("modle: {dim: 128}"), {"unknown section 'modle'", "did you mean 'model'"});
  expect_problem(problems_of("", {"optim.lrr=1"}), {"--set optim.lrr=1", "unknown key", "optim.lr"});
  expect_problem(problems_of("", {"optim"}), {"expected section.key=value"});
}

TEST(Config, WrongTypesNameTheFieldAndAnExample) {
  expect_problem(problems_of("model: {dim: abc}"), {"model.dim = 'abc' is not an integer", "e.g. 256"});
  expect_problem(problems_of("model: {tie_embeddings: maybe}"),
                 {"model.tie_embeddings", "not a boolean", "true or false"});
  expect_problem(problems_of("optim: {lr: fast}"), {"optim.lr = 'fast' is not a number"});
  expect_problem(problems_of("optim: {betas: 0.9}"), {"optim.betas", "list of two numbers"});
}

TEST(Config, OutOfRangeValuesGiveTheRange) {
  expect_problem(problems_of("model: {heads: 0}"), {"model.heads = 0 must be >= 1", "set model.heads"});
  expect_problem(problems_of("parallel: {zero: 4}"), {"parallel.zero = 4 must be in [0, 3]"});
  expect_problem(problems_of("parallel: {schedule: zigzag}"),
                 {"parallel.schedule = 'zigzag' is not one of gpipe, 1f1b, interleaved"});
  expect_problem(problems_of("optim: {betas: [0.9, 1.5]}"), {"optim.betas", "[0, 1)"});
  expect_problem(problems_of("optim: {lr: 1.0e-3, min_lr: 1.0e-2}"), {"optim.min_lr", "exceeds optim.lr"});
}

TEST(Config, EveryProblemIsReportedAtOnce) {
  const auto problems = problems_of("model: {dim: -1, heads: x}\ntrain: {stepz: 3}");
  EXPECT_EQ(problems.size(), 3u);
  try {
    parse_config("model: {dim: -1, heads: x}");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n') != std::string::npos, true) << "one line per problem";
  }
}

TEST(Config, LayoutMustMatchTheLaunchedRanks) {
  Config c = parse_config(kContract);
  EXPECT_TRUE(atl::runtime::validate_layout(c, 2).empty());
  const auto mismatch = atl::runtime::validate_layout(parse_config(kContract, {"parallel.islands=3"}), 4);
  ASSERT_EQ(mismatch.size(), 1u);
  EXPECT_NE(mismatch[0].find("parallel: islands*pp*dp*tp = 6 but 4 ranks were launched"), std::string::npos);

  const auto indivisible = atl::runtime::validate_layout(
      parse_config(kContract, {"train.global_batch=10", "parallel.microbatches=2"}), 2);
  ASSERT_EQ(indivisible.size(), 1u);
  EXPECT_NE(indivisible[0].find(
                "train.global_batch = 10 is not divisible by parallel.dp*parallel.microbatches = 4"),
            std::string::npos);
  const auto tp =
      atl::runtime::validate_layout(parse_config(kContract, {"parallel.tp=16", "parallel.dp=1"}), 16);
  ASSERT_EQ(tp.size(), 2u);  // heads 8 and kv_heads 8; ffn 688 = 16 * 43 divides
  EXPECT_NE(tp[0].find("model.heads = 8 is not divisible by parallel.tp = 16"), std::string::npos) << tp[0];
  EXPECT_NE(tp[1].find("model.kv_heads = 8 is not divisible by parallel.tp = 16"), std::string::npos)
      << tp[1];
  const auto heads = atl::runtime::validate_layout(parse_config(kContract, {"model.kv_heads=3"}), 2);
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_NE(heads[0].find("kv_heads must divide heads"), std::string::npos);
}

TEST(Config, ResolvedYamlRoundTripsAndTheTableListsEveryField) {
  const Config c = parse_config(kContract, {"optim.lr=1.5e-4", "run.dir=runs/a b", "parallel.bucket_mb=25"});
  const Config back = parse_config(atl::runtime::config_to_yaml(c));
  EXPECT_EQ(atl::runtime::config_to_yaml(back), atl::runtime::config_to_yaml(c));
  EXPECT_EQ(back.run.dir, "runs/a b");
  EXPECT_DOUBLE_EQ(back.optim.lr, 1.5e-4);
  EXPECT_DOUBLE_EQ(back.parallel.bucket_mb, 25.0);
  const std::string table = atl::runtime::config_table(c);
  EXPECT_NE(table.find("| optim.lr"), std::string::npos);
  EXPECT_NE(table.find("0.00015"), std::string::npos);
}
