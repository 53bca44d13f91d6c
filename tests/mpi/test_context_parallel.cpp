// Context parallelism at cp = the launched ranks (2 and 4). Ring attention against one rank's
// causal attention of the whole sequence: each rank's rows of the output and of dQ/dK/dV within
// 1e-5 in fp32, with the load-balanced chunk layout and the contiguous one, multi-head and
// grouped-query attention, without documents and with documents packed in the sequences (their
// starts inside chunks, on chunk edges, or a row of one document). Then the whole model against one
// rank (parity_harness.h), also with model.document_mask (alone, and with tp 2 + sequence
// parallelism), in bf16 against bf16 on one rank, and the validation loss under document masks
// against every document scored alone; the ring's bytes and K/V wait in the step metrics.
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "comm/single_rank_communicator.h"
#include "parallel/context_parallel_attention.h"
#include "parallel/document_mask.h"
#include "runtime/data/batches.h"
#include "runtime/model/llama.h"
#include "tests/parity_harness.h"

using atl::runtime::Config;
using atl::runtime::Trainer;
using atl::test::expect_parity;
using atl::test::layout;
using atl::test::world_size;

// Where the documents of each row start (TokenBatch::document_starts), in sequences of 2*cp chunks.
// Outside the anonymous namespace: the parameterised test's base names it.
enum class Documents { kNone, kInsideChunks, kOnChunkEdges, kOneDocument };

namespace {

using atl::parallel::ring_attention;
using atl::parallel::take_context_chunks;

// Same values on every rank: a generator seeded identically everywhere.
at::Tensor shared_randn(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, shape, gen);
}

at::Tensor leaf(const at::Tensor& t) {
  return t.clone().requires_grad_(true);
}

std::vector<std::vector<int32_t>> document_starts(Documents documents, int32_t chunks, int32_t chunk) {
  const int32_t seq = chunks * chunk;
  switch (documents) {
    case Documents::kInsideChunks:  // a document of one token first in row 1, one that spans chunks
      return {{3, 2 * chunk + 1, seq - 2}, {1, chunk + 2}};
    case Documents::kOnChunkEdges: {  // row 0: a document per chunk; row 1: two halves
      std::vector<int32_t> edges;
      for (int32_t c = 1; c < chunks; ++c) edges.push_back(c * chunk);
      return {edges, {seq / 2}};
    }
    case Documents::kOneDocument:
    case Documents::kNone:
      break;
  }
  return {{}, {}};
}

std::string name_of(Documents documents) {
  switch (documents) {
    case Documents::kInsideChunks:
      return "DocumentsInsideChunks";
    case Documents::kOnChunkEdges:
      return "DocumentsOnChunkEdges";
    case Documents::kOneDocument:
      return "OneDocument";
    case Documents::kNone:
      break;
  }
  return "";
}

// The reference mask, from the starts themselves: [rows, 1, seq, seq], 0 where query i sees key j
// (j <= i and no document starts in (j, i]), -inf elsewhere.
at::Tensor dense_mask(const std::vector<std::vector<int32_t>>& starts, int64_t seq) {
  const auto rows = static_cast<int64_t>(starts.size());
  at::Tensor mask = at::full({rows, 1, seq, seq}, -std::numeric_limits<float>::infinity());
  auto seen = mask.accessor<float, 4>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        bool same = true;
        for (const int32_t start : starts[static_cast<size_t>(r)]) same = same && !(start > j && start <= i);
        if (same) seen[r][0][i][j] = 0.0f;
      }
  return mask;
}

// The reference, composed from matmul and softmax: masked attention of the whole sequence with
// the kv heads repeated for their query heads.
at::Tensor dense_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& mask) {
  const int64_t groups = q.size(1) / k.size(1);
  const at::Tensor keys = k.repeat_interleave(groups, 1), values = v.repeat_interleave(groups, 1);
  const at::Tensor scores =
      at::matmul(q, keys.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  return at::matmul(at::softmax(scores + mask, -1), values);
}

// The tiny config (GQA, seq 32) laid out as dp x cp x tp over the launched ranks.
Config cp_layout(const std::string& tag, int cp, int tp = 1) {
  Config config = layout(tag, tp);
  config.parallel.cp = cp;
  config.parallel.dp = world_size() / (cp * tp);
  return config;
}

void expect_close(const at::Tensor& ours, const at::Tensor& dense, const char* what) {
  ASSERT_EQ(ours.sizes(), dense.sizes()) << what;
  const double diff = (ours - dense).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(1.0, dense.abs().max().item<double>())) << what << " max diff " << diff;
}

}  // namespace

// (load-balanced chunks, kv heads of 4 query heads, documents)
class RingAttentionParity : public testing::TestWithParam<std::tuple<bool, int64_t, Documents>> {};

TEST_P(RingAttentionParity, OutputAndGradientsMatchWholeSequence) {
  const auto [load_balanced, kv_heads, documents] = GetParam();
  auto cp = atl::test::MpiTestEnv::runtime().world();
  const int size = cp->size(), rank = cp->rank();
  const int64_t batch = 2, heads = 4, head_dim = 8, chunk = 5, seq = 2 * size * chunk;
  const at::Tensor q = shared_randn({batch, heads, seq, head_dim}, 1),
                   k = shared_randn({batch, kv_heads, seq, head_dim}, 2),
                   v = shared_randn({batch, kv_heads, seq, head_dim}, 3),
                   up = shared_randn({batch, heads, seq, head_dim}, 4);
  const auto starts = document_starts(documents, 2 * size, chunk);

  at::Tensor dense_q = leaf(q), dense_k = leaf(k), dense_v = leaf(v);
  const at::Tensor dense_out = dense_attention(dense_q, dense_k, dense_v, dense_mask(starts, seq));
  (dense_out * up).sum().backward();

  const auto local = [&](const at::Tensor& full) {
    return take_context_chunks(full, 2, size, rank, load_balanced);
  };
  at::Tensor ring_q = leaf(local(q)), ring_k = leaf(local(k)), ring_v = leaf(local(v));
  const at::Tensor ids =
      documents == Documents::kNone ? at::Tensor() : atl::parallel::document_ids(starts, seq);
  const at::Tensor out = ring_attention(ring_q, ring_k, ring_v, *cp, load_balanced, ids);
  (out * local(up)).sum().backward();

  expect_close(out, local(dense_out), "output");
  expect_close(ring_q.grad(), local(dense_q.grad()), "dQ");
  expect_close(ring_k.grad(), local(dense_k.grad()), "dK (summed over the ring and brought home)");
  expect_close(ring_v.grad(), local(dense_v.grad()), "dV (summed over the ring and brought home)");
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttentionParity,
                         testing::Combine(testing::Bool(), testing::Values<int64_t>(4, 2),
                                          testing::Values(Documents::kNone, Documents::kInsideChunks,
                                                          Documents::kOnChunkEdges, Documents::kOneDocument)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Balanced" : "Contiguous") +
                                  (std::get<1>(info.param) == 4 ? "Mha" : "Gqa") +
                                  name_of(std::get<2>(info.param));
                         });

TEST(RingAttention, RefusesDocumentIdsOfTheLocalChunks) {
  auto cp = atl::test::MpiTestEnv::runtime().world();
  const at::Tensor q = at::zeros({1, 2, 4, 8}), ids = at::zeros({1, 4}, at::TensorOptions().dtype(at::kLong));
  EXPECT_THROW(ring_attention(q, q, q, *cp, true, ids), std::invalid_argument);
}

TEST(ContextChunks, LoadBalancedRanksHoldHeadAndTail) {
  EXPECT_EQ(atl::parallel::context_chunks(4, 0, true), (std::array<int64_t, 2>{0, 7}));
  EXPECT_EQ(atl::parallel::context_chunks(4, 3, true), (std::array<int64_t, 2>{3, 4}));
  EXPECT_EQ(atl::parallel::context_chunks(4, 1, false), (std::array<int64_t, 2>{2, 3}));
  const at::Tensor positions = at::arange(8).view({1, 8});
  EXPECT_TRUE(
      take_context_chunks(positions, 1, 2, 1, true).equal(at::tensor({2, 3, 4, 5}, at::kLong).view({1, 4})));
  EXPECT_TRUE(
      take_context_chunks(positions, 1, 2, 0, true).equal(at::tensor({0, 1, 6, 7}, at::kLong).view({1, 4})));
  EXPECT_THROW(take_context_chunks(positions, 1, 3, 0, true), std::invalid_argument);
}

// The whole model at cp = the launched ranks (2 and 4), alone and composed, against one rank for 20
// steps: losses, gradient norms, first-step gradients, parameters and validation loss
// (tests/parity_harness.h says exactly what is compared and how closely).
TEST(ContextParallelParity, MatchesOneRank) {
  Config config = cp_layout("cp", world_size());
  config.optim.grad_clip = 0.0;  // unclipped, so the gradients compared are the raw average
  expect_parity(config);
}

// model.document_mask under cp: documents that start inside chunks and on their edges (seq 32,
// chunks of 32 / 2cp) keep attention within each document on every rank as on one rank.
TEST(ContextParallelParity, WithDocumentMaskMatchesOneRank) {
  Config config = cp_layout("cp-documents", world_size());
  atl::test::use_packed_documents(config);
  config.optim.grad_clip = 0.0;
  expect_parity(config);
}

// The trainer's validation loss under model.document_mask at cp = the launched ranks: each
// validation sequence scored document by document, every document alone through one rank's model
// with the trainer's parameters (a dense reference that knows no masks), over the same sequences.
TEST(ContextParallelValidation, DocumentMaskedLossScoresEachDocumentAlone) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  Config config = cp_layout("cp-val-documents", world_size());
  atl::test::use_packed_documents(config);
  config.train.steps = 2;
  Trainer trainer(config, *world, nullptr);
  trainer.train_step();
  const double validation = trainer.evaluate();

  at::NoGradGuard no_grad;
  const atl::runtime::ModelConfig& m = config.model;
  atl::parallel::FlatParameters params(atl::runtime::LlamaModel::param_infos(m), at::kFloat);
  const auto trained = atl::test::on_host(trainer.full_parameters());
  for (const atl::parallel::FlatEntry& e : params.entries()) e.value.copy_(trained.at(e.info.name));
  atl::comm::SingleRankCommunicator tp("tp");
  const atl::runtime::LlamaModel model(m, params, tp);
  const auto val = atl::runtime::open_sequence_source(config.data.val, atl::runtime::DataSplit::kVal, m.seq,
                                                      m.vocab, static_cast<uint64_t>(config.run.seed));
  const atl::runtime::TokenBatch batch = val->in_order(0, config.train.eval_sequences);
  double nats = 0.0;
  int cut = 0;
  for (int64_t row = 0; row < batch.inputs.size(0); ++row) {
    std::vector<int64_t> bounds{0};
    for (const int32_t start : batch.document_starts[static_cast<size_t>(row)]) bounds.push_back(start);
    bounds.push_back(m.seq);
    cut += static_cast<int>(bounds.size()) > 2 ? 1 : 0;
    for (size_t d = 0; d + 1 < bounds.size(); ++d) {
      const int64_t begin = bounds[d], length = bounds[d + 1] - begin;
      const at::Tensor logits =
          model.forward(batch.inputs[row].narrow(0, begin, length).unsqueeze(0))[0].narrow(-1, 0, m.vocab);
      nats +=
          at::cross_entropy_loss(logits, batch.targets[row].narrow(0, begin, length), {}, at::Reduction::Sum)
              .item<double>();
    }
  }
  ASSERT_GT(cut, 0) << "some validation sequence holds several documents";
  const double expected = nats / static_cast<double>(batch.targets.numel());
  EXPECT_NEAR(validation, expected, 1e-5 * expected);
  const double unmasked = model.loss(batch.inputs, batch.targets).item<double>();
  EXPECT_GT(std::abs(unmasked - expected), 1e-4) << "the documents change the loss: the check can tell";
}

// The ring's step metrics: the bytes it sent, exactly -- each layer's K/V passed on cp - 1 times in
// forward and again in backward, and their fp32 dK/dV cp times (home included) -- and the seconds
// this rank blocked waiting for them (the exposed K/V wait), both counted apart from the other groups.
TEST(ContextParallelMetrics, RingBytesAndKeyValueWait) {
  const Config config = cp_layout("cp-metrics", world_size());
  const atl::runtime::StepMetrics m = atl::test::first_step_metrics(config);
  const int cp = config.parallel.cp;
  const int64_t rows = config.train.global_batch / (config.parallel.dp * config.parallel.microbatches);
  const int64_t kv_bytes =
      rows * config.model.kv_heads * (config.model.seq / cp) * (config.model.dim / config.model.heads) * 4;
  EXPECT_TRUE(m.context_parallel);
  EXPECT_EQ(m.cp_bytes, static_cast<uint64_t>(config.model.layers * config.parallel.microbatches * kv_bytes *
                                              (2 * (cp - 1) + 2 * (cp - 1) + 2 * cp)));
  // On a GPU a wait for NCCL only orders the compute stream after the transfer: no host time to count.
  if (atl::test::test_device() == atl::runtime::DeviceKind::kCpu) {
    EXPECT_GT(m.kv_wait_seconds, 0.0);
  }
  EXPECT_LE(m.kv_wait_seconds, m.comm_wait_seconds) << "a part of all the step's waiting";
  EXPECT_GE(m.comm_bytes, m.cp_bytes + m.dp_bytes);
}

// ZeRO 1-3 shard over the dp group, here the cp ranks alone (dp 1 x cp 2): each stage against
// ZeRO-0 in the same layout (which MatchesOneRank holds to one rank), over 10 steps.
ATOLL_RUNS_AT(ContextParallelParity, ZeroStagesShardOverTheCpRanks, 2);
TEST(ContextParallelParity, ZeroStagesShardOverTheCpRanks) {
  Config config = cp_layout("cp-zero", 2);
  config.train.steps = 10;
  atl::test::expect_zero_parity(config);
}

ATOLL_RUNS_AT(ContextParallelParity, WithTensorAndSequenceParallelismMatchesOneRank, 4);
TEST(ContextParallelParity, WithTensorAndSequenceParallelismMatchesOneRank) {
  Config config = cp_layout("cp-tp-sp", 2, /*tp=*/2);
  config.parallel.sequence_parallel = true;
  expect_parity(config);
}

// Every split at once: the sequence over cp 2, each chunk's tokens over tp 2 outside attention
// (sequence parallelism), attention within documents that start inside and across the chunks.
ATOLL_RUNS_AT(ContextParallelParity, WithTensorSequenceParallelismAndDocumentMaskMatchesOneRank, 4);
TEST(ContextParallelParity, WithTensorSequenceParallelismAndDocumentMaskMatchesOneRank) {
  Config config = cp_layout("cp-tp-sp-documents", 2, /*tp=*/2);
  config.parallel.sequence_parallel = true;
  atl::test::use_packed_documents(config);
  config.optim.grad_clip = 0.0;
  expect_parity(config);
}

// bf16 under cp = the launched ranks against bf16 on one rank: the blocks' partial outputs merge in
// fp32, so the two runs differ by bf16's rounding of sums taken in another order, not by more. A lost
// log-sum-exp correction or a block attended twice is off by far more (the loss by over 10%).
TEST(ContextParallelParity, Bf16MatchesOneRankToBf16Precision) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  Config config = cp_layout("cp-bf16", world_size());
  config.train.precision = atl::runtime::Precision::kBf16;
  config.train.eval_every = 1;  // only enables evaluation after training in the harness
  const atl::test::RunResult reference = atl::test::single_rank_reference(config, *world);
  atl::test::Agreement bf16;
  bf16.loss = 1e-2;
  bf16.grad_norm = 5e-2;
  bf16.params = 2e-2;
  atl::test::expect_runs_agree(atl::test::train(config, *world), reference, bf16);
}

// Full recomputation reruns each layer's forward, ring attention included, inside its backward.
TEST(ContextParallelParity, WithFullRecomputationMatchesOneRank) {
  Config config = cp_layout("cp-recompute", 2);
  config.train.recompute = atl::runtime::Recompute::kFull;
  expect_parity(config);
}

ATOLL_RUNS_AT(ContextParallelParity, WithPipelineParallelismMatchesOneRank, 4);
TEST(ContextParallelParity, WithPipelineParallelismMatchesOneRank) {
  Config config = cp_layout("cp-pp", 2);
  config.parallel.dp = 1;
  config.parallel.pp = 2;
  config.parallel.microbatches = 2;
  expect_parity(config);
}

// The sequence split is not state: a checkpoint saved at cp = the launched ranks (ZeRO-1 over them)
// resumes at cp 1 (dp = the launched ranks) with the saved parameters bit for bit, and the two
// layouts train on from it with the same losses.
TEST(ContextParallelCheckpoint, SavedAtCpResumesAtCpOne) {
  auto world = atl::test::MpiTestEnv::runtime().world();
  Config saved = cp_layout("cp-ckpt", world_size());
  saved.run.dir = atl::test::from_rank0(*world, saved.run.dir);
  saved.parallel.zero = 1;
  saved.checkpoint.resume = "none";
  atl::runtime::Trainer original(saved, *world, nullptr);
  for (int s = 0; s < 3; ++s) original.train_step();
  original.save_checkpoint();

  Config resumed_config = saved;
  resumed_config.parallel.dp = world_size();
  resumed_config.parallel.cp = 1;
  resumed_config.checkpoint.resume = saved.checkpoint_dir() + "/step-3";
  resumed_config.run.dir += "-cp1";
  atl::runtime::Trainer resumed(resumed_config, *world, nullptr);
  ASSERT_EQ(resumed.step(), 3);
  const auto expected = atl::test::on_host(original.full_parameters());
  for (const auto& [name, value] : atl::test::on_host(resumed.full_parameters()))
    EXPECT_TRUE(value.equal(expected.at(name))) << name;
  for (int s = 0; s < 3; ++s) {
    const double at_cp = original.train_step().loss, at_cp1 = resumed.train_step().loss;
    EXPECT_NEAR(at_cp1, at_cp, 1e-5 * at_cp) << "step " << 4 + s;
  }
}
