// `atoll plan` arithmetic (runtime/plan.h) against facts that do not depend on it: Llama-2-7B's
// published parameter count, the parameters the model really allocates per stage, ZeRO's division
// of model state, DeepSpeed's headline table and Megatron's analytic tensor-parallel traffic.
#include <gtest/gtest.h>

#include "launcher/activation_estimate.h"
#include "launcher/plan.h"
#include "parallel/flat_parameters.h"
#include "runtime/model/llama.h"

namespace atl::launcher {
namespace {

using namespace atl::runtime;  // the config and model the launcher's back ends read

Config llama2_7b(int pp, int dp, int tp) {
  Config c;
  c.model.vocab = 32000;
  c.model.dim = 4096;
  c.model.layers = 32;
  c.model.heads = c.model.kv_heads = 32;
  c.model.ffn = 11008;
  c.model.seq = 4096;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.parallel.tp = tp;
  c.parallel.microbatches = 4 * pp;
  c.train.global_batch = 4 * pp * dp;
  return c;
}

TEST(Plan, CountsLlama2SevenBillionParameters) {
  const Plan plan = make_plan(llama2_7b(1, 64, 1));
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.world_size, 64);
  EXPECT_EQ(plan.stages[0].parameters, 6738415616);  // Hugging Face's count for Llama-2-7b
}

TEST(Plan, StageParametersAreWhatTheModelAllocates) {
  Config c = llama2_7b(4, 2, 8);
  c.model.dim = 64, c.model.heads = c.model.kv_heads = 8, c.model.ffn = 128, c.model.vocab = 300;
  c.model.layers = 8, c.model.tie_embeddings = true;
  const Plan plan = make_plan(c);
  ASSERT_EQ(plan.stages.size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    const ModelPart part{2 * stage, 2 * stage + 2, stage == 0, stage == 3};
    const parallel::FlatParameters params(LlamaModel::param_infos(c.model, 8, part), at::kFloat);
    EXPECT_EQ(plan.stages[stage].parameters, params.numel()) << "stage " << stage;
  }
  EXPECT_GT(plan.stages[0].embedding_bytes, 0.0);  // tied: first and last stage sum their copies
  EXPECT_EQ(plan.stages[1].embedding_bytes, 0.0);
}

// train.precision fp8: the weight cache holds W and W^T of each decoder linear weight in FP8, a byte
// each per element: every layer of the stage, or the two units ZeRO-3 holds gathered at a time.
TEST(Plan, CountsTheFp8WeightCache) {
  Config c = llama2_7b(2, 4, 2);
  EXPECT_EQ(make_plan(c).stages[0].fp8_cache_bytes, 0.0) << "bf16 and fp32 hold no FP8 cache";
  c.train.precision = Precision::kFp8;
  const double dim = 4096, ffn = 11008;
  const double layer =
      (4 * dim * dim + 3 * dim * ffn) / 2;  // q, k, v, o (kv_heads = heads), gate, up, down; tp 2
  for (int zero : {0, 1, 2}) {
    c.parallel.zero = zero;
    for (const StagePlan& s : make_plan(c).stages) EXPECT_DOUBLE_EQ(s.fp8_cache_bytes, 2.0 * 16 * layer);
  }
  c.parallel.zero = 3;
  for (const StagePlan& s : make_plan(c).stages) EXPECT_DOUBLE_EQ(s.fp8_cache_bytes, 2.0 * 2 * layer);
}

TEST(Plan, ZeroStagesShardModelStateOverDataParallelRanks) {
  Config c = llama2_7b(1, 4, 1);
  const StagePlan plain = make_plan(c).stages[0];
  const double params = static_cast<double>(plain.parameters);
  EXPECT_DOUBLE_EQ(plain.model_state_bytes(), 16.0 * params);
  c.parallel.zero = 1;
  EXPECT_DOUBLE_EQ(make_plan(c).stages[0].optimizer_bytes, plain.optimizer_bytes / 4);
  EXPECT_LE(make_plan(c).stages[0].optimizer_bytes, 0.27 * plain.optimizer_bytes);
  c.parallel.zero = 3;
  const StagePlan z3 = make_plan(c).stages[0];
  EXPECT_DOUBLE_EQ(z3.model_state_bytes(), plain.model_state_bytes() / 4);
  // Stage 0: one all-reduce (2 ring halves). Stage 3 with m = 4 microbatches: a reduce-scatter per
  // microbatch and a gather before each forward and each backward: 4 + 8 halves, 6x.
  EXPECT_DOUBLE_EQ(z3.dp_bytes, 6.0 * plain.dp_bytes);
  c.parallel.microbatches = 1;
  Config one_microbatch = c;
  one_microbatch.parallel.zero = 0;
  EXPECT_DOUBLE_EQ(make_plan(c).stages[0].dp_bytes, 1.5 * make_plan(one_microbatch).stages[0].dp_bytes);
  EXPECT_DOUBLE_EQ(mixed_precision_state_bytes_per_parameter(0, 64), 16.0);
  EXPECT_DOUBLE_EQ(mixed_precision_state_bytes_per_parameter(1, 64), 4.0 + 12.0 / 64);
  EXPECT_DOUBLE_EQ(mixed_precision_state_bytes_per_parameter(2, 64), 2.0 + 14.0 / 64);
  EXPECT_DOUBLE_EQ(mixed_precision_state_bytes_per_parameter(3, 64), 0.25);
}

TEST(Plan, TensorParallelTrafficIsMegatronsAnalyticFigure) {
  // The training benchmark's TP=2 run: (4 x layers + 2) all-reduces of batch*seq*dim fp32 per step,
  // each sending as many bytes as it holds at tp = 2 (measured there: 72.0 MiB).
  Config c;
  c.parallel.dp = 1;
  c.parallel.tp = 2;
  EXPECT_DOUBLE_EQ(make_plan(c).stages[0].tp_bytes, 72.0 * 1024 * 1024);
}

TEST(Plan, RecomputationRerunsTheTensorParallelExitsAndItsForward) {
  // The rerun reissues a layer's two forward exits: (6 x layers + 2) all-reduces instead of (4 x
  // layers + 2); full recomputation reruns the layers' forward products, selective around the
  // fused kernel none of them.
  Config c;
  c.parallel.dp = 1;
  c.parallel.tp = 2;
  const double none = make_plan(c).stages[0].tp_bytes;
  for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    c.train.recompute = mode;
    EXPECT_DOUBLE_EQ(make_plan(c).stages[0].tp_bytes,
                     none * (6.0 * c.model.layers + 2) / (4.0 * c.model.layers + 2));
  }
  const double d = c.model.dim,
               q_k_v_o = d * (d / c.model.heads) * (2.0 * c.model.heads + 2.0 * c.model.kv_heads);
  const double per_layer = 2.0 * (q_k_v_o + 3 * d * c.model.ffn) + 4.0 * c.model.seq * d;
  EXPECT_DOUBLE_EQ(atl::launcher::recompute_flops_per_token(c), c.model.layers * per_layer);
  c.train.recompute = Recompute::kSelective;
  EXPECT_EQ(atl::launcher::recompute_flops_per_token(c), 0.0);
}

TEST(Plan, OneFOneBKeepsFewerActivationsThanGPipe) {
  Config c = llama2_7b(4, 1, 1);
  c.parallel.schedule = PipelineSchedule::kGPipe;
  const double gpipe = make_plan(c).stages[0].activation_bytes;
  c.parallel.schedule = PipelineSchedule::kOneFOneB;
  // 4 of 16 microbatches alive; one layer's backward gradients on top in either schedule.
  const atl::launcher::LayerActivations layer = atl::launcher::layer_activations(c, 1);
  const double transient = layer.rerun + layer.gradients;
  EXPECT_DOUBLE_EQ(make_plan(c).stages[0].activation_bytes - transient, (gpipe - transient) / 4);
  EXPECT_THROW(make_plan(llama2_7b(3, 1, 1)), std::invalid_argument);  // 32 layers over 3 stages
}

// On the CPU in bf16 up to seq 512 causal attention is the hand-written kernel, which keeps its
// [seq, seq] probabilities; document-masked attention always runs SDPA, which keeps none.
TEST(Plan, DocumentMaskedAttentionKeepsNoProbabilities) {
  Config c = llama2_7b(1, 1, 1);
  c.train.precision = Precision::kBf16;
  c.model.seq = 256;
  const double causal = atl::launcher::layer_activations(c, 1).kept;
  c.model.document_mask = true;
  const double masked = atl::launcher::layer_activations(c, 1).kept;
  // Per token, bf16: the hand-written kernel's 5 x dim values and heads x seq probabilities, against
  // SDPA's q, k, v and output (4 x dim, MHA) and its fp32 log-sum-exp per head.
  const double per_token = 2.0 * (c.model.dim + c.model.heads * c.model.seq) - 4.0 * c.model.heads;
  EXPECT_DOUBLE_EQ(causal - masked, per_token * c.model.seq);
}

TEST(Plan, IslandsSendTheModelOncePerRoundAtTheCodecsWidth) {
  Config c = llama2_7b(1, 8, 1);
  c.parallel.zero = 1;
  c.parallel.islands = 4;
  c.train.global_batch = 4 * 4 * 8;
  const double owned = static_cast<double>(make_plan(c).stages[0].parameters) / 8;  // ZeRO-1 over dp 8
  c.outer.algorithm = OuterAlgorithm::kNone;  // gradients across islands every step: 2(k-1)/k of fp32
  EXPECT_DOUBLE_EQ(make_plan(c).stages[0].outer_bytes_per_step, 1.5 * 4 * owned);
  EXPECT_EQ(make_plan(c).stages[0].outer_state_bytes, 0.0);
  c.outer.algorithm = OuterAlgorithm::kDiLoCo;
  c.outer.inner_steps = 50;
  const StagePlan diloco = make_plan(c).stages[0];
  EXPECT_DOUBLE_EQ(diloco.outer_state_bytes, 8 * owned) << "phi and momentum for the owned shard";
  EXPECT_DOUBLE_EQ(diloco.outer_bytes_per_sync, 1.5 * 4 * owned);
  EXPECT_DOUBLE_EQ(diloco.outer_bytes_per_step, 1.5 * 4 * owned / 50);
  c.outer.compression = optim::outer::Codec::kInt8;
  EXPECT_NEAR(make_plan(c).stages[0].outer_bytes_per_sync, 1.5 * owned * (1 + 8.0 / 256), 1e-6 * owned);
  c.outer.algorithm = OuterAlgorithm::kNoLoCo;  // phi and Delta to one partner
  EXPECT_NEAR(make_plan(c).stages[0].outer_bytes_per_sync, 2 * owned * (1 + 8.0 / 256), 1e-6 * owned);
}

// Context parallelism: a rank holds 2 of the 2*cp chunks of each sequence, so at (seq S, cp) it
// keeps what one rank keeps at (S/cp, cp 1) (the fused attention on both sides), shards model state
// over dp x cp, and passes its K/V around the ring: cp-1 hops forward, cp-1 hops of K/V and cp of
// their fp32 gradients backward, per layer and microbatch.
TEST(Plan, ContextParallelKeepsATokenShareAndPassesKeyValuesAroundTheRing) {
  Config whole = llama2_7b(1, 2, 1);
  whole.run.device = DeviceKind::kCuda;
  whole.model.seq = 4 * 4096;
  whole.parallel.cp = 4;
  whole.parallel.zero = 1;
  Config quarter = whole;
  quarter.model.seq = 4096;
  quarter.parallel.cp = 1;
  const StagePlan split = make_plan(whole).stages[0], short_sequences = make_plan(quarter).stages[0];
  EXPECT_DOUBLE_EQ(split.activation_bytes, short_sequences.activation_bytes);
  EXPECT_EQ(make_plan(whole).world_size, 8);

  Config eight_dp = quarter;
  eight_dp.parallel.dp = 8;
  eight_dp.train.global_batch = whole.train.global_batch * 4;  // the same microbatch per rank
  EXPECT_DOUBLE_EQ(split.optimizer_bytes, make_plan(eight_dp).stages[0].optimizer_bytes);
  EXPECT_DOUBLE_EQ(split.dp_bytes, make_plan(eight_dp).stages[0].dp_bytes);
  EXPECT_EQ(short_sequences.cp_bytes, 0.0);

  // One K (or V) block of a rank: a microbatch of one sequence's 4096 local positions, 32 heads of
  // 128, fp32; 32 layers, 4 microbatches.
  const double block = 4096.0 * 32 * 128 * 4;
  EXPECT_DOUBLE_EQ(split.cp_bytes, 4 * 32 * (3 * 2 * block + 3 * 2 * block + 4 * 2 * block));
  whole.model.kv_heads = 8;  // grouped-query attention: only the kv heads travel
  EXPECT_DOUBLE_EQ(make_plan(whole).stages[0].cp_bytes, split.cp_bytes / 4);
}

// atoll plan --memory: a sequence that does not fit one rank gets the smallest cp that fits.
TEST(Plan, SuggestsTheSmallestContextParallelSizeThatFits) {
  Config c = llama2_7b(1, 8, 1);
  c.run.device = DeviceKind::kCuda;
  c.train.precision = Precision::kBf16;
  c.parallel.zero = 3;
  c.parallel.microbatches = 1;
  c.train.global_batch = 8;
  c.model.seq = 131072;
  const double gib = 1024.0 * 1024 * 1024;
  const std::string advice = format_fit(c, make_plan(c), 80 * gib);
  ASSERT_NE(advice.find("does not fit"), std::string::npos) << advice;
  const size_t at = advice.find("parallel.cp ");
  ASSERT_NE(at, std::string::npos) << advice;
  const int cp = std::stoi(advice.substr(at + 12));
  const auto fullest = [&](int size) {
    Config trial = c;
    trial.parallel.cp = size;
    const StagePlan s = make_plan(trial).stages[0];
    return s.model_state_bytes() + s.activation_bytes;
  };
  EXPECT_LE(fullest(cp), 80 * gib) << advice;
  EXPECT_GT(fullest(cp / 2), 80 * gib) << advice;
  EXPECT_NE(format_fit(c, make_plan(c), 1e6 * gib).find("fits:"), std::string::npos);
  c.model.seq = 12;  // 2*cp divides it for cp 2 only, which leaves the model state over 1 GiB
  EXPECT_NE(format_fit(c, make_plan(c), 1 * gib).find("no parallel.cp"), std::string::npos);
}

}  // namespace
}  // namespace atl::launcher
