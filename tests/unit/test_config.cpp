// The experiment config (runtime/config.h): the YAML contract and its defaults, overrides, one
// specific line per bad input, the layout checks, and the saved YAML and start-up table.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/config/config.h"

namespace atl::runtime {
namespace {

// The layout from DESIGN §9 / the README, every field spelled out.
const char* kContract = R"(
run:      { dir: runs/NAME, seed: 1234, threads: 0 }
model:    { vocab: 256, dim: 256, layers: 4, heads: 8, kv_heads: 8, ffn: 688, seq: 256, tie_embeddings: false, rope_theta: 10000, norm_eps: 1.0e-5, init_std: 0.02 }
parallel: { islands: 1, pp: 1, dp: 2, tp: 1, zero: 0, microbatches: 1, schedule: 1f1b, virtual_stages: 1, bucket_mb: 25 }
train:    { steps: 200, global_batch: 16, log_every: 10, eval_every: 50, eval_sequences: 32 }
optim:    { lr: 3.0e-4, min_lr: 3.0e-5, warmup: 20, betas: [0.9, 0.95], eps: 1.0e-8, weight_decay: 0.1, grad_clip: 1.0, schedule: cosine }
data:     { train: data/pydocs/train.bin, val: data/pydocs/val.bin }
)";

// The problem lines parse_config reports (empty when it parses).
std::vector<std::string> problems(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, overrides);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

// Expects exactly one problem, containing every fragment (the field, the value, the fix).
void expect_one(const std::vector<std::string>& found, const std::vector<std::string>& fragments) {
  std::string all;
  for (const std::string& line : found) all += "\n  " + line;
  ASSERT_EQ(found.size(), 1u) << (found.empty() ? "no problem reported" : all);
  for (const std::string& fragment : fragments)
    EXPECT_NE(found[0].find(fragment), std::string::npos)
        << "'" << found[0] << "' lacks '" << fragment << "'";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST(ConfigParse, DefaultsAreTheDocumentedOnes) {
  const Config c;
  EXPECT_EQ(c.run.dir, "runs/default");
  EXPECT_EQ(c.run.seed, 1234);
  EXPECT_EQ(c.run.threads, 0);
  EXPECT_EQ(c.model.vocab, 256);
  EXPECT_EQ(c.model.ffn, 688);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 10000.0);
  EXPECT_EQ(c.parallel.dp, 1);
  EXPECT_EQ(c.parallel.schedule, PipelineSchedule::kOneFOneB);
  EXPECT_DOUBLE_EQ(c.parallel.bucket_mb, 25.0);
  EXPECT_EQ(c.train.steps, 200);
  EXPECT_DOUBLE_EQ(c.optim.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.95);
  EXPECT_EQ(c.optim.schedule, optim::LrDecay::kCosine);
  EXPECT_EQ(c.data.val, DatasetList{{"data/pydocs/val.bin"}});
  // Empty text, comments only and empty sections all give the defaults (and the defaults are valid).
  for (const char* text : {"", "# nothing here\n", "model:\noptim:\n"})
    EXPECT_EQ(config_to_yaml(parse_config(text)), config_to_yaml(c)) << text;
}

TEST(ConfigParse, ContractYamlGivesItsValues) {
  const Config c = parse_config(kContract);
  EXPECT_EQ(c.run.dir, "runs/NAME");
  EXPECT_EQ(c.model.dim, 256);
  EXPECT_EQ(c.model.kv_heads, 8);
  EXPECT_FALSE(c.model.tie_embeddings);
  EXPECT_DOUBLE_EQ(c.model.norm_eps, 1e-5);
  EXPECT_EQ(c.parallel.dp, 2);
  EXPECT_DOUBLE_EQ(c.parallel.bucket_mb, 25.0);  // an integer in YAML is fine for a number field
  EXPECT_EQ(c.train.eval_sequences, 32);
  EXPECT_DOUBLE_EQ(c.optim.min_lr, 3e-5);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.optim.eps, 1e-8);
  EXPECT_EQ(c.data.train, DatasetList{{"data/pydocs/train.bin"}});
  // Block style reads the same as flow style.
  const Config block =
      parse_config("model:\n  dim: 128\n  tie_embeddings: true\noptim:\n  betas:\n    - 0.8\n    - 0.9\n");
  EXPECT_EQ(block.model.dim, 128);
  EXPECT_TRUE(block.model.tie_embeddings);
  EXPECT_DOUBLE_EQ(block.optim.beta1, 0.8);
}

TEST(ConfigParse, OverridesAreYamlValuesAndMayCreateSections) {
  const Config c = parse_config(kContract, {"optim.lr=1e-3", "optim.betas=[0.8,0.99]", "parallel.dp=4",
                                            "model.tie_embeddings=true", "run.dir=runs/other"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.8);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.99);
  EXPECT_EQ(c.parallel.dp, 4);
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_EQ(c.run.dir, "runs/other");
  EXPECT_EQ(c.model.dim, 256);  // untouched fields keep the file's values
  // A section the file lacks, or leaves empty, is created.
  EXPECT_EQ(parse_config("model: {dim: 64}", {"train.steps=7"}).train.steps, 7);
  EXPECT_EQ(parse_config("train:\n", {"train.steps=8"}).train.steps, 8);
  // The last override of a key wins.
  EXPECT_EQ(parse_config("", {"train.steps=1", "train.steps=2"}).train.steps, 2);
}

TEST(ConfigParse, DataTakesAPathOrAListOfWeightedDatasets) {
  const Config c = parse_config(
      "data:\n  train:\n    - { path: data/web/*.bin, weight: 0.7 }\n    - { path: data/code/, weight: 0.3 "
      "}\n"
      "  val: [data/val.bin, { path: data/code/ }]\n");
  EXPECT_EQ(c.data.train, (DatasetList{{"data/web/*.bin", 0.7}, {"data/code/", 0.3}}));
  EXPECT_EQ(c.data.val, (DatasetList{{"data/val.bin", 1.0}, {"data/code/", 1.0}}));
  // Saved and read back as written; a single path stays a plain path.
  const Config back = parse_config(config_to_yaml(c));
  EXPECT_EQ(back.data.train, c.data.train);
  EXPECT_EQ(back.data.val, c.data.val);
  EXPECT_NE(config_to_yaml(Config{}).find("  train: data/pydocs/train.bin\n"), std::string::npos);
  EXPECT_EQ(parse_config("", {"data.train=[{path: a.bin, weight: 2}]"}).data.train,
            (DatasetList{{"a.bin", 2.0}}));

  const auto problem_of = [](const std::string& yaml) {
    try {
      parse_config(yaml);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.problems().size(), 1u) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(problem_of("data: { train: [{ weight: 0.3 }] }"),
            "config: data.train[0] = {weight: 0.3} has no path; write e.g. { path: data/web/, weight: 0.3 }");
  EXPECT_EQ(
      problem_of("data: { train: [a.bin, { path: b.bin, weight: 0 }] }"),
      "config: data.train[1].weight = 0 must be > 0; set data.train[1].weight to a positive number, e.g. "
      "0.3");
  EXPECT_EQ(problem_of("data: { val: [{ path: b.bin, weight: -1 }] }").substr(0, 48),
            "config: data.val[0].weight = -1 must be > 0; set");
  EXPECT_NE(problem_of("data: { train: [{ path: b.bin, wieght: 1 }] }").find("unknown key 'wieght'"),
            std::string::npos);
  EXPECT_NE(problem_of("data: { train: [] }").find("is neither a path nor a list of datasets"),
            std::string::npos);
}

TEST(ConfigErrors, UnknownNamesSuggestTheClosestKnownOne) {
  expect_one(problems("model: {dimm: 128}"),
             {"config: unknown key 'model.dimm' (did you mean 'model.dim'?)"});
  expect_one(problems("modle: {dim: 128}"), {"config: unknown section 'modle' (did you mean 'model'?)"});
  expect_one(problems("model: {lr: 1}"), {"unknown key 'model.lr' (did you mean 'optim.lr'?)"});
  expect_one(problems("optim: {warmpu: 5}"), {"(did you mean 'optim.warmup'?)"});
  // Nothing close: the known names are listed instead.
  expect_one(problems("model: {colour: red}"),
             {"unknown key 'model.colour'", "model has vocab, dim, layers"});
  expect_one(problems("logging: {every: 3}"), {"unknown section 'logging'", "the sections are run, model"});
}

TEST(ConfigErrors, BadOverridesSayWhatToWrite) {
  expect_one(problems("", {"optim.lrr=1"}),
             {"config: --set optim.lrr=1: unknown key 'optim.lrr' (did you mean 'optim.lr'?)"});
  expect_one(problems("", {"foo"}), {"config: --set foo: expected section.key=value", "--set optim.lr=1e-3"});
  expect_one(problems("", {"steps=3"}), {"--set steps=3: expected section.key=value"});
  expect_one(problems("", {"optim.betas=[0.9"}), {"--set optim.betas=[0.9: the value is not valid YAML"});
  // A well-formed override with a bad value gets the field's own message.
  expect_one(problems("", {"model.dim=abc"}), {"config: model.dim = 'abc' is not an integer"});
}

TEST(ConfigErrors, WrongTypesNameTheFieldAndAnExample) {
  expect_one(problems("model: {dim: abc}"),
             {"config: model.dim = 'abc' is not an integer; write e.g. model.dim: 256"});
  expect_one(problems("model: {layers: 2.5}"), {"model.layers = '2.5' is not an integer"});
  expect_one(problems("model: {tie_embeddings: maybe}"),
             {"model.tie_embeddings = 'maybe' is not a boolean; write model.tie_embeddings: true or false"});
  expect_one(problems("optim: {lr: fast}"),
             {"optim.lr = 'fast' is not a number; write e.g. optim.lr: 0.0003"});
  expect_one(problems("optim: {lr: .inf}"), {"optim.lr = .inf is not a finite number"});
  expect_one(problems("optim: {betas: 0.9}"),
             {"optim.betas = '0.9' is not a list of two numbers", "[0.9, 0.95]"});
  expect_one(problems("optim: {betas: [0.9, 0.95, 0.99]}"),
             {"optim.betas = [0.9, 0.95, 0.99] is not a list"});
  expect_one(problems("run: {dir: [a, b]}"),
             {"run.dir = [a, b] is not a string; write e.g. run.dir: runs/default"});
  expect_one(problems("run: {dir: ''}"), {"run.dir = '' is empty; write e.g. run.dir: runs/default"});
  expect_one(problems("model: {dim: 99999999999}"),
             {"model.dim = 99999999999 does not fit in an integer; use at most 2147483647"});
  expect_one(problems("model: {dim: -99999999999}"), {"model.dim = -99999999999 must be >= 1"});
  expect_one(problems("model: 3"), {"section 'model' = '3' is not a map"});
  expect_one(problems("model: {dim: 1, dim: 2}"), {"model.dim is given twice; keep one"});
}

TEST(ConfigErrors, OutOfRangeValuesGiveTheRangeAndAFix) {
  struct Case {
    std::string yaml;
    std::vector<std::string> fragments;
  };
  const std::vector<Case> cases = {
      {"model: {heads: 0}",
       {"config: model.heads = 0 must be >= 1; set model.heads to a positive integer, e.g. 8"}},
      {"model: {vocab: 1}", {"model.vocab = 1 must be >= 2", "e.g. 256"}},
      {"model: {seq: 0}", {"model.seq = 0 must be >= 1"}},
      {"model: {norm_eps: 0}", {"model.norm_eps = 0 must be > 0; set model.norm_eps to a positive number"}},
      {"run: {threads: -1}", {"run.threads = -1 must be >= 0; set run.threads to 0 or more"}},
      {"parallel: {zero: 4}",
       {"parallel.zero = 4 must be in [0, 3]; set parallel.zero to a value in [0, 3]"}},
      {"parallel: {tp: 0}", {"parallel.tp = 0 must be >= 1"}},
      {"parallel: {microbatches: 0}", {"parallel.microbatches = 0 must be >= 1"}},
      {"parallel: {bucket_mb: 0}", {"parallel.bucket_mb = 0 must be > 0"}},
      {"parallel: {schedule: zigzag}",
       {"parallel.schedule = 'zigzag' is not one of gpipe, 1f1b, interleaved; set parallel.schedule to one "
        "of"}},
      {"parallel: {reduce_dtype: fp16}",
       {"parallel.reduce_dtype = 'fp16' is not one of fp32, bf16; set parallel.reduce_dtype to one of"}},
      {"train: {precision: fp4}",
       {"train.precision = 'fp4' is not one of fp32, bf16, fp8; set train.precision"}},
      {"train: {fp8_scaling: blockwise}",
       {"train.fp8_scaling = 'blockwise' is not one of tensorwise, rowwise; set train.fp8_scaling"}},
      {"train: {steps: 0}", {"train.steps = 0 must be >= 1"}},
      {"train: {log_every: 0}", {"train.log_every = 0 must be >= 1"}},
      {"train: {eval_every: -1}", {"train.eval_every = -1 must be >= 0"}},
      {"train: {eval_sequences: -2}", {"train.eval_sequences = -2 must be >= 0"}},
      {"optim: {lr: 0}", {"optim.lr = 0 must be > 0", "e.g. 0.0003"}},
      {"optim: {lr: 1.0e-3, min_lr: 1.0e-2}",
       {"optim.min_lr = 0.01 exceeds optim.lr = 0.001", "set optim.min_lr <= optim.lr"}},
      {"optim: {min_lr: -1.0e-5}", {"optim.min_lr = -1.0e-5 must be >= 0"}},
      {"optim: {warmup: -1}", {"optim.warmup = -1 must be >= 0"}},
      {"optim: {betas: [0.9, 1.0]}", {"optim.betas = [0.9, 1] must both be in [0, 1)"}},
      {"optim: {eps: 0}", {"optim.eps = 0 must be > 0"}},
      {"optim: {weight_decay: -0.1}", {"optim.weight_decay = -0.1 must be >= 0"}},
      {"optim: {grad_clip: -1}", {"optim.grad_clip = -1 must be >= 0"}},
      {"optim: {schedule: linear}", {"optim.schedule = 'linear' is not one of cosine, constant, wsd"}},
      {"outer: {compression: int3}",
       {"outer.compression = 'int3' is not one of none, fp16, bf16, int8, int4; set outer.compression"}},
      {"outer: {compression: INT8}",
       {"outer.compression = 'INT8' is not one of none, fp16, bf16, int8, int4"}},
      {"outer: {compression: ''}", {"outer.compression = '' is empty"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.yaml);
    expect_one(problems(c.yaml), c.fragments);
  }
  // The edges of each range are accepted: 0 means never / off / auto where documented.
  EXPECT_TRUE(problems("run: {threads: 0}\nparallel: {zero: 3}\ntrain: {eval_every: 0, eval_sequences: 0}\n"
                       "optim: {min_lr: 0, warmup: 0, grad_clip: 0, weight_decay: 0, betas: [0, 0.999]}")
                  .empty());
}

TEST(ConfigErrors, EveryProblemIsReportedOneLineEach) {
  const std::vector<std::string> found =
      problems("model: {dim: -1, heads: x}\ntrain: {stepz: 3}\nmodle: {}", {"optim.lr=0", "bad"});
  ASSERT_EQ(found.size(), 6u);
  try {
    parse_config("model: {dim: -1, heads: x}");
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), e.problems()[0] + "\n" + e.problems()[1]);
  }
}

TEST(ConfigErrors, InvalidYamlNamesTheLine) {
  expect_one(problems("model:\n  dim: [1, 2\n"), {"config: not valid YAML at line"});
  expect_one(problems("- a\n- b\n"), {"config: the top level is", "not a map of sections"});
}

TEST(ConfigErrors, LoadConfigNamesAnUnreadableFile) {
  expect_one(
      [] {
        try {
          load_config("/nonexistent/atoll.yaml");
        } catch (const ConfigError& e) {
          return e.problems();
        }
        return std::vector<std::string>{};
      }(),
      {"config: cannot read /nonexistent/atoll.yaml: No such file or directory; check the path"});
  EXPECT_THROW(load_config(std::filesystem::temp_directory_path().string()), ConfigError);

  const std::string path = (std::filesystem::temp_directory_path() / "atoll_test_config.yaml").string();
  std::ofstream(path) << kContract;
  EXPECT_EQ(load_config(path, {"train.steps=5"}).train.steps, 5);
  std::remove(path.c_str());
}

TEST(ConfigLayout, AValidLayoutPasses) {
  EXPECT_TRUE(validate_layout(parse_config(kContract), 2).empty());
  EXPECT_TRUE(validate_layout(parse_config(kContract, {"parallel.tp=2", "parallel.islands=2"}), 8).empty());
}

TEST(ConfigLayout, RankCountAndBatchSplit) {
  expect_one(validate_layout(parse_config(kContract, {"parallel.islands=4"}), 4),
             {"parallel: islands*pp*dp*tp = 8 but 4 ranks were launched; launch 8 ranks (atoll launch does "
              "this) or change the layout"});
  expect_one(
      validate_layout(parse_config(kContract, {"train.global_batch=10", "parallel.microbatches=2"}), 2),
      {"train.global_batch = 10 is not divisible by parallel.islands*parallel.dp*parallel.microbatches = 4; "
       "use a "
       "multiple of 4"});
}

TEST(ConfigLayout, ModelShapeAndSplits) {
  const auto check = [](const std::vector<std::string>& overrides, int ranks, const std::string& fragment) {
    SCOPED_TRACE(fragment);
    expect_one(validate_layout(parse_config(kContract, overrides), ranks), {fragment});
  };
  check({"model.dim=100"}, 2, "model.dim = 100 is not divisible by model.heads = 8; each head gets");
  check({"model.dim=72"}, 2, "model.dim / model.heads = 9 is odd; RoPE");
  check({"model.kv_heads=3"}, 2,
        "model.heads = 8 is not divisible by model.kv_heads = 3; kv_heads must divide heads");
  check({"model.ffn=690", "parallel.tp=4", "parallel.dp=1"}, 4,
        "model.ffn = 690 is not divisible by parallel.tp = 4");
  check({"model.seq=250", "parallel.tp=4", "parallel.dp=1", "parallel.sequence_parallel=true"}, 4,
        "model.seq = 250 is not divisible by parallel.tp = 4; sequence parallelism");
  check({"parallel.virtual_stages=2", "parallel.pp=2", "parallel.dp=1"}, 2,
        "parallel.virtual_stages = 2 needs parallel.schedule = interleaved, not '1f1b'");
  check({"parallel.schedule=interleaved", "parallel.virtual_stages=2", "parallel.pp=2", "parallel.dp=1",
         "parallel.microbatches=3", "train.global_batch=3"},
        2, "parallel.microbatches = 3 is not divisible by parallel.pp = 2");
  check(
      {"parallel.pp=3", "parallel.dp=1"}, 3,
      "model.layers = 4 does not split evenly over pp*virtual_stages = 3 virtual stages; use a multiple of 3 "
      "layers or list the layers of each virtual stage in parallel.stage_layers");
  check({"parallel.pp=2", "parallel.dp=1", "parallel.stage_layers=[1, 2, 1]"}, 2,
        "parallel.stage_layers has 3 entries but there are 2 virtual stages");
  check({"parallel.pp=2", "parallel.dp=1", "parallel.stage_layers=[1, 2]"}, 2,
        "parallel.stage_layers sums to 3 but model.layers = 4");
  check({"parallel.pp=2", "parallel.dp=1", "parallel.stage_layers=[4, 0]"}, 2,
        "every virtual stage needs at least one layer");
  check({"parallel.schedule=interleaved", "parallel.pp=4", "parallel.dp=1", "parallel.microbatches=2",
         "train.global_batch=2"},
        4, "parallel.microbatches = 2 is fewer than parallel.pp = 4; interleaved 1F1B needs");
  check({"parallel.schedule=interleaved", "parallel.virtual_stages=2", "parallel.pp=1", "parallel.dp=2"}, 2,
        "parallel.virtual_stages = 2 with parallel.pp = 1");
  EXPECT_TRUE(
      validate_layout(
          parse_config(kContract, {"parallel.pp=2", "parallel.dp=1", "parallel.stage_layers=[1, 3]"}), 2)
          .empty());
  // tp = 16 splits neither heads (8) nor kv heads (8): two lines.
  EXPECT_EQ(validate_layout(parse_config(kContract, {"parallel.tp=16", "parallel.dp=1"}), 16).size(), 2u);
}

// A kernel lever set to true where the config leaves it nothing to build on is one line naming the
// field, the value, why and the fix; auto in the same place resolves quietly (to off).
TEST(ConfigLayout, AKernelLeverThatCannotApplySaysSo) {
  const auto check = [](const std::vector<std::string>& overrides,
                        const std::vector<std::string>& fragments) {
    SCOPED_TRACE(overrides.front());
    expect_one(validate_layout(parse_config(kContract, overrides), 2), fragments);
  };
  check({"kernels.first_grad_copy=true", "parallel.zero=2"},
        {"config: kernels.first_grad_copy = true cannot apply at parallel.zero = 2 (the first gradient copy "
         "lands in the ZeRO-0/1 flat buffer); set it to auto or false, or parallel.zero to 0 or 1"});
  check({"kernels.fused_weight_grad=true", "kernels.first_grad_copy=false"},
        {"config: kernels.fused_weight_grad = true cannot apply with kernels.first_grad_copy = false (the "
         "weight gradients are written into the buffer the first gradient copy fills); set "
         "kernels.first_grad_copy: true, or kernels.fused_weight_grad to auto or false"});
  check({"kernels.fused_weight_grad=true", "parallel.zero=3"},
        {"config: kernels.fused_weight_grad = true cannot apply at parallel.zero = 3 (the weight gradients "
         "are written into the ZeRO-0/1 flat buffer, with kernels.first_grad_copy); set it to auto or "
         "false, or parallel.zero to 0 or 1"});
  // At ZeRO >= 2 the stage is the reason, whatever first_grad_copy says.
  check({"kernels.fused_weight_grad=true", "kernels.first_grad_copy=false", "parallel.zero=2"},
        {"kernels.fused_weight_grad = true cannot apply at parallel.zero = 2"});
  check({"kernels.fused_clip=true", "kernels.fused_adamw=false"},
        {"config: kernels.fused_clip = true cannot apply with kernels.fused_adamw = false (clipping's scale "
         "is applied inside the fused AdamW kernel); set kernels.fused_adamw: true, or kernels.fused_clip "
         "to auto or false"});
  // Both levers forced at ZeRO-2: a line each.
  EXPECT_EQ(validate_layout(parse_config(kContract, {"kernels.first_grad_copy=true",
                                                     "kernels.fused_weight_grad=true", "parallel.zero=2"}),
                            2)
                .size(),
            2u);

  // auto (and false) where true is refused, and true where it applies: no problem.
  for (const std::vector<std::string>& quiet : std::vector<std::vector<std::string>>{
           {"kernels.first_grad_copy=auto", "kernels.fused_weight_grad=auto", "parallel.zero=2"},
           {"kernels.first_grad_copy=false", "kernels.fused_weight_grad=false", "parallel.zero=3"},
           {"kernels.first_grad_copy=false", "kernels.fused_weight_grad=auto"},
           {"kernels.fused_adamw=false", "kernels.fused_clip=auto"},
           {"kernels.first_grad_copy=true", "kernels.fused_weight_grad=true", "parallel.zero=1"},
           {"kernels.first_grad_copy=auto", "kernels.fused_weight_grad=true"},
           {"kernels.fused_adamw=auto", "kernels.fused_clip=true"},
           {"kernels.fused_adamw=true", "kernels.fused_clip=true"}}) {
    SCOPED_TRACE(quiet.front() + " " + quiet.back());
    EXPECT_TRUE(validate_layout(parse_config(kContract, quiet), 2).empty());
  }
}

// Every field set away from its default, including strings YAML would misread unquoted.
Config unusual_config() {
  return parse_config(R"(
run:      { dir: "runs/a b: ~#x 'q' \"d\"", seed: 7, threads: 3, device: cuda, share_gpu: true,
            deterministic: true, mfu_peak_tflops: 989.5 }
model:    { vocab: 300, dim: 64, layers: 2, heads: 4, kv_heads: 2, ffn: 100, seq: 32, tie_embeddings: true,
            document_mask: true, rope_theta: 500000, norm_eps: 1.0e-6, init_std: 0.01, init_from: w.safetensors }
parallel: { islands: 2, pp: 2, dp: 3, tp: 2, cp: 2, zero: 2, microbatches: 4, schedule: interleaved,
            virtual_stages: 2, bucket_mb: 12.5, reduce_dtype: bf16, sequence_parallel: true, stage_layers: [1, 2, 1] }
train:    { steps: 9, global_batch: 24, log_every: 3, eval_every: 0, eval_sequences: 5, precision: bf16,
            on_nonfinite: skip, recompute: selective, sample_every: 7, sample_prompt: "def #: ", sample_tokens: 9,
            profile_start: 4, profile_steps: 2, fp8_scaling: rowwise }
optim:    { lr: 1.5e-4, min_lr: 0, warmup: 2, betas: [0.8, 0.99], eps: 1.0e-10, weight_decay: 0.01,
            grad_clip: 0.5, schedule: wsd }
kernels:  { fused_adamw: false, fused_clip: true, first_grad_copy: false, fused_weight_grad: true, fused_rms_norm: true, native_gqa: false,
            fused_swiglu: true, fused_rope: false, fused_cross_entropy: false, attention: cudnn }
data:     { train: "~", val: "true", tokenizer: "no" }
checkpoint: { dir: ckpts, every: 5, keep: 2, keep_every: 10, mode: async_lazy, resume: none }
outer:    { algorithm: noloco, inner_steps: 12, lr: 0.5, momentum: 0.8, nesterov: false, fragments: 3, delay: 2,
            mix: 0.25, group_size: 3, gamma: 0.4, delayed: true, compression: int4, topk: 8, max_pseudo_grad_norm: 12.5,
            simulated_bandwidth_mbps: 100, simulated_latency_ms: 20, rendezvous: "head:29400", island: 1,
            timeout_s: 5, reconnect_s: 30, secret_file: "/etc/atoll/job secret", min_islands: 1, grace_s: 2.5,
            through_leader: true }
comm:     { timeout_s: 2.5, flight_records: 9 }
)");
}

TEST(ConfigOuter, DefaultsPerAlgorithm) {
  // DiLoCo: the sweep's plain averaging; NoLoCo: its paper's values.
  const Config diloco = parse_config("outer: { algorithm: diloco }");
  EXPECT_DOUBLE_EQ(diloco.outer.lr, 1.0);
  EXPECT_DOUBLE_EQ(diloco.outer.momentum, 0.0);
  const Config noloco_defaults = parse_config("outer: { algorithm: noloco }");
  EXPECT_DOUBLE_EQ(noloco_defaults.outer.lr, 0.7);
  EXPECT_DOUBLE_EQ(noloco_defaults.outer.momentum, 0.5);
  EXPECT_DOUBLE_EQ(noloco_defaults.outer.gamma, 0.7);
  const Config noloco = parse_config("outer: { algorithm: noloco, lr: 0.6 }");
  EXPECT_DOUBLE_EQ(noloco.outer.momentum, 0.5);
  EXPECT_DOUBLE_EQ(noloco.outer.gamma, 0.6) << "gamma defaults to outer.lr";
  const Config given = parse_config("outer: { algorithm: noloco, momentum: 0.3, gamma: 0.1 }");
  EXPECT_DOUBLE_EQ(given.outer.momentum, 0.3);
  EXPECT_DOUBLE_EQ(given.outer.gamma, 0.1);
}

TEST(ConfigOuter, CrossFieldProblemsNameTheFix) {
  const auto problems_of = [](const std::string& yaml, int ranks) {
    std::string text;
    for (const std::string& line : validate_layout(parse_config(yaml), ranks)) text += line + "\n";
    return text;
  };
  EXPECT_NE(problems_of("parallel: { islands: 2 }\nouter: { algorithm: diloco, fragments: 2 }", 2)
                .find("outer.fragments = 2 applies to outer.algorithm = streaming_diloco"),
            std::string::npos);
  EXPECT_NE(problems_of("parallel: { islands: 2 }\nouter: { algorithm: streaming_diloco, inner_steps: 10, "
                        "fragments: 4 }",
                        2)
                .find("outer.inner_steps = 10 is not divisible by outer.fragments = 4"),
            std::string::npos);
  EXPECT_NE(problems_of("parallel: { islands: 2 }\nouter: { algorithm: streaming_diloco, inner_steps: 12, "
                        "fragments: 4, delay: 3 }",
                        2)
                .find("outer.delay = 3 must be below outer.inner_steps/outer.fragments = 3"),
            std::string::npos);
  EXPECT_NE(problems_of("parallel: { islands: 2 }\nouter: { algorithm: noloco, group_size: 3 }", 2)
                .find("outer.group_size = 3 exceeds parallel.islands = 2"),
            std::string::npos);
  EXPECT_NE(
      problems_of("parallel: { islands: 2 }\ntrain: { global_batch: 5 }\nouter: { algorithm: diloco }", 2)
          .find("train.global_batch = 5 is not divisible by parallel.islands*parallel.dp*parallel.micro"),
      std::string::npos);
  EXPECT_EQ(problems_of("parallel: { islands: 4 }\ntrain: { global_batch: 16 }\nouter: { algorithm: "
                        "streaming_diloco, inner_steps: 12, fragments: 4, delay: 2 }",
                        4),
            "");
}

TEST(ConfigOutput, SavedYamlRoundTripsEveryField) {
  const Config c = unusual_config();
  const std::string yaml = config_to_yaml(c);
  // Every field line differs from the default's, so each field is both saved and non-default here.
  const std::vector<std::string> lines = lines_of(yaml), defaults = lines_of(config_to_yaml(Config{}));
  ASSERT_EQ(lines.size(), defaults.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("  ", 0) == 0) {
      EXPECT_NE(lines[i], defaults[i]);
    }
  }

  const Config back = parse_config(yaml);
  EXPECT_EQ(config_to_yaml(back), yaml);
  EXPECT_EQ(back.run.dir, "runs/a b: ~#x 'q' \"d\"");
  EXPECT_EQ(back.data.train, DatasetList{{"~"}});
  EXPECT_EQ(back.data.val, DatasetList{{"true"}});
  EXPECT_EQ(back.data.tokenizer, "no");
  EXPECT_EQ(back.train.sample_prompt, "def #: ");
  EXPECT_DOUBLE_EQ(back.optim.lr, 1.5e-4);
  EXPECT_DOUBLE_EQ(back.optim.beta2, 0.99);
  EXPECT_DOUBLE_EQ(back.model.rope_theta, 500000.0);
  EXPECT_NE(yaml.find("  rope_theta: 500000.0\n"), std::string::npos) << "whole doubles stay floats";
  EXPECT_NE(yaml.find("  lr: 0.00015\n"), std::string::npos) << "shortest round-trip decimal";
  EXPECT_NE(yaml.find("  betas: [0.8, 0.99]\n"), std::string::npos);
  EXPECT_EQ(back.parallel.stage_layers, (std::vector<int>{1, 2, 1}));
}

TEST(ConfigOutput, TableListsEveryFieldInABox) {
  const std::string table = config_table(parse_config(kContract));
  const std::vector<std::string> rows = lines_of(table);
  for (const std::string& row : rows) EXPECT_EQ(row.size(), rows[0].size()) << row;
  EXPECT_EQ(rows.front(), rows.back());
  EXPECT_EQ(rows.front()[0], '+');
  for (const char* expected : {"| run.dir ", "runs/NAME", "| model.tie_embeddings ", "| optim.betas ",
                               "[0.9, 0.95]", "| optim.lr ", "0.0003", "| data.val "})
    EXPECT_NE(table.find(expected), std::string::npos) << expected;
  // A header, then one row per field line of the saved YAML.
  size_t fields = 0;
  for (const std::string& line : lines_of(config_to_yaml(Config{})))
    if (line.rfind("  ", 0) == 0) ++fields;
  EXPECT_EQ(rows.size(), fields + 4);
}

// `atoll config reference` documents every key the parser accepts, and only those: each key of the
// saved YAML has one entry whose default is the saved default, a type, and a line of meaning; and the
// parser takes every documented key at its documented default.
TEST(ConfigReference, EveryAcceptedKeyHasItsDefaultAndAMeaning) {
  const std::vector<ConfigKeyReference> keys = config_reference();
  std::string section;
  std::vector<std::string> saved;  // "section.key: default" from the saved YAML of the defaults
  for (const std::string& line : lines_of(config_to_yaml(Config{}))) {
    if (line.rfind("  ", 0) != 0)
      section = line.substr(0, line.size() - 1);
    else
      saved.push_back(section + "." + line.substr(2));
  }
  ASSERT_EQ(keys.size(), saved.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const ConfigKeyReference& k = keys[i];
    const std::string name = k.section + "." + k.key;
    EXPECT_EQ(name + ": " + k.default_value, saved[i]);
    EXPECT_FALSE(k.type.empty()) << name;
    EXPECT_GE(k.meaning.size(), 12u) << name << " has no line of meaning";
    EXPECT_EQ(k.meaning.back(), '.') << name << ": " << k.meaning;
    EXPECT_EQ(k.meaning.find('\n'), std::string::npos) << name;
    EXPECT_TRUE(problems("run: {}", {name + "=" + k.default_value}).empty()) << name;
  }
  // A choice lists exactly its spellings, a bounded number its range.
  const auto find = [&](const std::string& name) {
    for (const ConfigKeyReference& k : keys)
      if (k.section + "." + k.key == name) return k;
    ADD_FAILURE() << name << " is not in the reference";
    return ConfigKeyReference{};
  };
  EXPECT_EQ(find("train.recompute").allowed, "none, selective, full");
  EXPECT_EQ(find("parallel.zero").allowed, "in [0, 3]");
  EXPECT_EQ(find("outer.momentum").allowed, "in [0, 1)");
  EXPECT_EQ(find("model.dim").allowed, ">= 1");
  EXPECT_EQ(find("run.dir").allowed, "");
}

}  // namespace atl::runtime

namespace atl::runtime {
namespace {

// Island jobs agree on the model and outer settings; those that exchange rank by rank (elastic, or
// averaging every step) also on their layout, while a fixed membership's islands may differ there.
TEST(IslandSharedSettings, OnlyIslandsExchangingRankByRankShareTheirLayout) {
  const std::vector<std::string> jobs = {"parallel.islands=2", "outer.algorithm=diloco",
                                         "outer.rendezvous=127.0.0.1:29400", "outer.island=0",
                                         "parallel.tp=2"};
  const Config fixed = parse_config("", jobs);
  std::vector<std::string> elastic_overrides = jobs;
  elastic_overrides.push_back("parallel.islands=3");
  elastic_overrides.push_back("outer.min_islands=2");
  const Config elastic = parse_config("", elastic_overrides);
  ASSERT_TRUE(fixed.islands_meet_canonically());
  ASSERT_FALSE(elastic.islands_meet_canonically());
  EXPECT_EQ(island_shared_settings(fixed).find("parallel.tp"), std::string::npos);
  EXPECT_NE(island_shared_settings(fixed).find("model.dim: "), std::string::npos);
  EXPECT_NE(island_shared_settings(fixed).find("parallel.islands: 2"), std::string::npos);
  EXPECT_NE(island_shared_settings(elastic).find("parallel.tp: 2"), std::string::npos);
  EXPECT_NE(island_shared_settings(elastic).find("parallel.zero: "), std::string::npos);
}

}  // namespace
}  // namespace atl::runtime
