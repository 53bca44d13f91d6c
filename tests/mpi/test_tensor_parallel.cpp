// Tensor-parallel building blocks, the functions the model calls, against their dense LibTorch
// equivalents, at TP = the launched ranks (2 and 4): outputs and every gradient within 1e-6 in fp32,
// with and without sequence parallelism, including a vocabulary that is padded (10 real rows of 12)
// and ignored labels.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "comm/mpi_communicator.h"
#include "parallel/tensor_parallel.h"
#include "tests/mpi_test_env.h"

namespace {

using atl::comm::MpiCommunicator;

std::unique_ptr<MpiCommunicator> tp_group() {
  return atl::test::MpiTestEnv::runtime().world();
}

// Same values on every rank: a generator seeded identically everywhere.
at::Tensor shared_randn(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::normal(0.0, 1.0, shape, gen);
}

at::Tensor leaf(const at::Tensor& t) {
  return t.clone().requires_grad_(true);
}

void expect_close(const at::Tensor& ours, const at::Tensor& dense, const char* what) {
  ASSERT_EQ(ours.sizes(), dense.sizes()) << what;
  const double diff = (ours - dense).abs().max().item<double>();
  EXPECT_LE(diff, 1e-6 * std::max(1.0, dense.abs().max().item<double>())) << what << " max diff " << diff;
}

}  // namespace

// The model's layer pair as the model runs it (llama.cpp): a column-parallel layer's input enters
// the region, a row-parallel layer's partial output leaves it; with sequence parallelism the
// activations outside the region are this rank's positions of the sequence.
class TensorParallelRegion : public testing::TestWithParam<bool> {};

TEST_P(TensorParallelRegion, ColumnParallelLinearMatchesDense) {
  const bool sequence_parallel = GetParam();
  auto tp = tp_group();
  const int64_t out = 12, in = 8, seq = 2 * tp->size(), rows = out / tp->size(), first = rows * tp->rank();
  const at::Tensor w = shared_randn({out, in}, 1), x = shared_randn({3, seq, in}, 2),
                   up = shared_randn({3, seq, out}, 3);

  at::Tensor dense_x = leaf(x), dense_w = leaf(w);
  const at::Tensor dense_y = at::linear(dense_x, dense_w);
  (dense_y * up).sum().backward();

  // With sequence parallelism each rank enters with its positions and computes over all of them.
  const int64_t piece = sequence_parallel ? seq / tp->size() : seq,
                start = sequence_parallel ? piece * tp->rank() : 0;
  at::Tensor tp_x = leaf(x.narrow(1, start, piece)), tp_w = leaf(w.narrow(0, first, rows));
  const at::Tensor y = at::linear(atl::parallel::enter_tp_region(tp_x, *tp, sequence_parallel), tp_w);
  (y * up.narrow(-1, first, rows)).sum().backward();

  expect_close(y, dense_y.narrow(-1, first, rows), "output shard");
  expect_close(tp_w.grad(), dense_w.grad().narrow(0, first, rows), "weight grad");
  expect_close(tp_x.grad(), dense_x.grad().narrow(1, start, piece),
               "input grad (all-reduced, or reduce-scattered, in backward)");
}

TEST_P(TensorParallelRegion, RowParallelLinearMatchesDense) {
  const bool sequence_parallel = GetParam();
  auto tp = tp_group();
  const int64_t out = 6, in = 12, seq = 2 * tp->size(), cols = in / tp->size(), first = cols * tp->rank();
  const at::Tensor w = shared_randn({out, in}, 4), x = shared_randn({2, seq, in}, 5),
                   up = shared_randn({2, seq, out}, 6);

  at::Tensor dense_x = leaf(x), dense_w = leaf(w);
  const at::Tensor dense_y = at::linear(dense_x, dense_w);
  (dense_y * up).sum().backward();

  // With sequence parallelism each rank leaves with its positions of the summed output.
  const int64_t piece = sequence_parallel ? seq / tp->size() : seq,
                start = sequence_parallel ? piece * tp->rank() : 0;
  at::Tensor tp_x = leaf(x.narrow(-1, first, cols)), tp_w = leaf(w.narrow(1, first, cols));
  const at::Tensor y = atl::parallel::exit_tp_region(at::linear(tp_x, tp_w), *tp, sequence_parallel);
  (y * up.narrow(1, start, piece)).sum().backward();

  expect_close(y, dense_y.narrow(1, start, piece), "output (all-reduced, or reduce-scattered)");
  expect_close(tp_w.grad(), dense_w.grad().narrow(1, first, cols), "weight grad");
  expect_close(tp_x.grad(), dense_x.grad().narrow(-1, first, cols), "input grad");
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, TensorParallelRegion, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "SequenceParallel" : "Replicated";
                         });

TEST(TensorParallel, VocabParallelEmbeddingMatchesDense) {
  auto tp = tp_group();
  const int64_t padded = 12, dim = 5;
  const auto shard = atl::parallel::vocab_shard(padded, tp->size(), tp->rank());
  const at::Tensor w = shared_randn({padded, dim}, 7), up = shared_randn({2, 10, dim}, 8);
  const at::Tensor ids = at::arange(20, at::kLong).remainder(10).view({2, 10});

  at::Tensor dense_w = leaf(w);
  const at::Tensor dense = at::embedding(dense_w, ids);
  (dense * up).sum().backward();

  at::Tensor tp_w = leaf(w.narrow(0, shard.start, shard.rows));
  const at::Tensor out = atl::parallel::vocab_parallel_embedding(ids, tp_w, shard.start, *tp);
  (out * up).sum().backward();

  expect_close(out, dense, "embedding");
  expect_close(tp_w.grad(), dense_w.grad().narrow(0, shard.start, shard.rows), "weight grad");
}

TEST(TensorParallel, VocabParallelCrossEntropyMatchesDenseWithPaddingAndIgnoredLabels) {
  auto tp = tp_group();
  // 10 real rows of 16: at TP 4 the last rank holds padding only (rows 12-15).
  const int64_t vocab = 10, padded = 16, tokens = 9;
  const auto shard = atl::parallel::vocab_shard(padded, tp->size(), tp->rank());
  const at::Tensor logits = shared_randn({tokens, padded}, 9) * 3;
  const at::Tensor targets = at::tensor({0, 9, 4, -100, 5, 1, -100, 8, 3}, at::kLong);

  at::Tensor dense_logits = leaf(logits);
  const at::Tensor dense =
      at::cross_entropy_loss(dense_logits.narrow(1, 0, vocab), targets, {}, at::Reduction::Mean, -100);
  dense.backward();

  at::Tensor tp_logits = leaf(logits.narrow(1, shard.start, shard.rows));
  const at::Tensor loss =
      atl::parallel::vocab_parallel_cross_entropy(tp_logits, targets, shard.start, vocab, *tp);
  loss.backward();

  expect_close(loss, dense, "loss");
  expect_close(tp_logits.grad(), dense_logits.grad().narrow(1, shard.start, shard.rows), "logit grad");
}

TEST(TensorParallel, SequenceGatherAndReduceScatterAreAdjoint) {
  auto tp = tp_group();
  const int64_t seq = 4 * tp->size(), piece = seq / tp->size(), first = piece * tp->rank();
  const at::Tensor full = shared_randn({2, seq, 3}, 10), up = shared_randn({2, seq, 3}, 11);

  // gather: each rank contributes its positions; backward reduce-scatters the upstream gradient.
  at::Tensor shard = leaf(full.narrow(1, first, piece));
  const at::Tensor gathered = atl::parallel::gather_sequence(shard, *tp);
  (gathered * up).sum().backward();
  expect_close(gathered, full, "gathered sequence");
  expect_close(shard.grad(), up.narrow(1, first, piece) * tp->size(), "gather backward (sum over ranks)");

  // reduce-scatter: sums the ranks' tensors and keeps this rank's positions; backward all-gathers.
  at::Tensor x = leaf(full * (tp->rank() + 1));
  const at::Tensor scattered = atl::parallel::reduce_scatter_sequence(x, *tp);
  (scattered * up.narrow(1, first, piece)).sum().backward();
  const double ranks_sum = tp->size() * (tp->size() + 1) / 2.0;
  expect_close(scattered, full.narrow(1, first, piece) * ranks_sum, "reduce-scattered sequence");
  expect_close(x.grad(), up, "reduce-scatter backward (all-gather)");
}

TEST(TensorParallel, SequenceParallelRefusesASequenceTheGroupDoesNotDivide) {
  auto tp = tp_group();
  const int64_t seq = 2 * tp->size() + 1;
  const at::Tensor x = shared_randn({2, seq, 3}, 12);
  const std::string expected = "sequence length " + std::to_string(seq) +
                               " is not divisible by the tensor-parallel size " + std::to_string(tp->size());
  try {
    atl::parallel::exit_tp_region(x, *tp, /*sequence_parallel=*/true);
    FAIL() << "a sequence of " << seq << " positions was split over " << tp->size() << " ranks";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}
