// Document-masked attention without context parallelism (parallel/document_mask.h and the model's
// document_ids): the ids a row's starts give, the blocks ring attention skips, and through the real
// model a packed sequence of two documents whose second document's logits are those of the second
// document run alone (RoPE positions are not reset, but attention scores depend only on the distance
// between positions, so a document sees the same scores wherever it lies in the sequence).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "comm/single_rank_communicator.h"
#include "parallel/document_mask.h"
#include "runtime/model/llama.h"
#include "tests/error_of.h"

namespace {

using atl::parallel::block_mask;
using atl::parallel::BlockMask;
using atl::parallel::document_ids;

at::Tensor longs(const std::vector<int64_t>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong));
}

TEST(DocumentIds, CountTheStartsAtOrBeforeEachPosition) {
  const at::Tensor ids = document_ids({{2, 5}, {}, {1}}, 6);
  EXPECT_TRUE(ids[0].equal(longs({0, 0, 1, 1, 1, 2})));
  EXPECT_TRUE(ids[1].equal(longs({0, 0, 0, 0, 0, 0})));
  EXPECT_TRUE(ids[2].equal(longs({0, 1, 1, 1, 1, 1})));
}

TEST(DocumentIds, RefuseStartsOutsideTheSequenceOrOutOfOrder) {
  for (const std::vector<int32_t>& bad : std::vector<std::vector<int32_t>>{{0}, {6}, {3, 3}, {4, 2}}) {
    const std::string error = atl::test::error_of([&] { document_ids({{}, bad}, 6); });
    EXPECT_NE(error.find("row 1 has a document start at"), std::string::npos) << error;
  }
}

TEST(DocumentCausalMask, SeesEarlierKeysOfTheSameDocumentOnly) {
  const at::Tensor ids = longs({0, 0, 1, 1}).view({1, 4});
  const at::Tensor mask = atl::parallel::document_causal_mask(ids, ids, /*causal=*/true);
  const at::Tensor expected = at::tensor({1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1}).view({1, 1, 4, 4});
  EXPECT_TRUE(mask.equal(expected.to(at::kBool)));
}

// Chunks of 2 in two rows: row 0 is one document, row 1 starts a document at every chunk edge.
TEST(BlockMask, SkipsBlocksThatShareNoDocument) {
  const at::Tensor ids = document_ids({{}, {2, 4}}, 6);
  const auto chunk = [&](int64_t index) { return ids.narrow(1, 2 * index, 2); };
  const auto kind = [&](int64_t q, int64_t k, const at::Tensor& q_ids, const at::Tensor& k_ids) {
    return block_mask(q, k, q_ids, k_ids, at::kFloat).kind;
  };
  EXPECT_EQ(kind(0, 1, chunk(0), chunk(1)), BlockMask::Kind::kNone) << "a later chunk";
  // Row 0 sees all of chunk 0 from chunk 2, row 1 none of it: masked, row 1 seeing nothing.
  const BlockMask cut = block_mask(2, 0, chunk(2), chunk(0), at::kFloat);
  ASSERT_EQ(cut.kind, BlockMask::Kind::kMasked);
  EXPECT_TRUE(cut.rows_seeing.equal(at::tensor({1, 1, 0, 0}).view({2, 1, 2}).to(at::kBool)));
  EXPECT_TRUE(cut.additive[1].isneginf().all().item<bool>());
  // Only row 1: no document in common, so nothing to compute.
  EXPECT_EQ(kind(2, 0, chunk(2).narrow(0, 1, 1), chunk(0).narrow(0, 1, 1)), BlockMask::Kind::kNone);
  // Only row 0: one document, so the causal mask alone.
  EXPECT_EQ(kind(2, 0, chunk(2).narrow(0, 0, 1), chunk(0).narrow(0, 0, 1)), BlockMask::Kind::kFull);
  EXPECT_EQ(kind(1, 1, chunk(1), chunk(1)), BlockMask::Kind::kCausal)
      << "each row's chunk within one document";
  EXPECT_EQ(kind(1, 1, at::Tensor(), at::Tensor()), BlockMask::Kind::kCausal) << "no document mask";
}

atl::runtime::ModelConfig two_document_model(int kv_heads) {
  atl::runtime::ModelConfig m;
  m.vocab = 100;
  m.dim = 32;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.ffn = 48;
  m.seq = 24;
  return m;
}

at::Tensor document_tokens(int64_t n, int64_t seed) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 37 + seed) % 100);
  return longs(ids).view({1, n});
}

double max_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

class DocumentMaskedModel : public testing::TestWithParam<int> {};

// Two documents packed into one sequence of 24: the first 7 tokens and the next 17.
TEST_P(DocumentMaskedModel, SecondDocumentPackedEqualsItAlone) {
  const atl::runtime::ModelConfig config = two_document_model(GetParam());
  atl::parallel::FlatParameters params(atl::runtime::LlamaModel::param_infos(config), at::kFloat);
  atl::runtime::initialize_parameters(config, 7, params);
  atl::comm::SingleRankCommunicator tp("tp");
  const atl::runtime::LlamaModel model(config, params, tp);
  at::NoGradGuard no_grad;

  const int64_t first = 7;
  const at::Tensor tokens = at::cat({document_tokens(first, 11), document_tokens(config.seq - first, 5)}, 1);
  const at::Tensor packed = model.forward(tokens, document_ids({{first}}, config.seq));
  const at::Tensor alone = model.forward(tokens.narrow(1, first, config.seq - first));
  EXPECT_LE(max_difference(packed.narrow(1, first, config.seq - first), alone), 1e-5);
  EXPECT_LE(max_difference(packed.narrow(1, 0, first), model.forward(tokens.narrow(1, 0, first))), 1e-5);
  // Without the mask the second document sees the first: the check above can tell.
  EXPECT_GT(max_difference(model.forward(tokens).narrow(1, first, config.seq - first), alone), 1e-3);
  // One document per row: the causal attention of the whole sequence.
  EXPECT_LE(max_difference(model.forward(tokens, document_ids({{}}, config.seq)), model.forward(tokens)),
            1e-5);
}

// The loss and every gradient with the documents of three rows, under each train.recompute mode.
std::pair<at::Tensor, at::Tensor> masked_loss_and_grads(atl::runtime::Recompute recompute, int kv_heads) {
  const atl::runtime::ModelConfig config = two_document_model(kv_heads);
  atl::parallel::FlatParameters params(atl::runtime::LlamaModel::param_infos(config), at::kFloat);
  atl::runtime::initialize_parameters(config, 7, params);
  atl::comm::SingleRankCommunicator tp("tp");
  const atl::runtime::LlamaModel model(config, params, tp, false, {}, nullptr, {}, recompute);
  at::manual_seed(8);
  const at::Tensor tokens = at::randint(0, config.vocab, {3, config.seq});
  const at::Tensor targets = at::randint(0, config.vocab, {3, config.seq});
  params.zero_grads();
  const at::Tensor loss =
      model.loss_of(model.forward(tokens, document_ids({{5, 6, 20}, {}, {12}}, config.seq)), targets);
  loss.backward();
  return {loss.detach(), params.grads().clone()};
}

// A recomputed layer reruns its attention with the documents it ran with: the same loss and
// gradients as without recomputation, bit for bit.
TEST_P(DocumentMaskedModel, RecomputationKeepsTheDocuments) {
  using atl::runtime::Recompute;
  const auto [loss, grads] = masked_loss_and_grads(Recompute::kNone, GetParam());
  for (const Recompute recompute : {Recompute::kSelective, Recompute::kFull}) {
    const auto [again_loss, again_grads] = masked_loss_and_grads(recompute, GetParam());
    EXPECT_TRUE(again_loss.equal(loss));
    EXPECT_TRUE(again_grads.equal(grads));
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, DocumentMaskedModel, testing::Values(4, 2),
                         [](const auto& info) { return info.param == 4 ? "Mha" : "Gqa"; });

}  // namespace
