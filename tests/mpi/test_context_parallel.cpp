// Ring attention at cp = the launched ranks (2 and 4) against one rank's causal attention of the
// whole sequence: each rank's rows of the output and of dQ/dK/dV within 1e-5 in fp32, with the
// load-balanced chunk layout and the contiguous one, multi-head and grouped-query attention.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <tuple>

#include "comm/mpi_communicator.h"
#include "parallel/context_parallel_attention.h"
#include "tests/mpi_test_env.h"

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

// The reference, composed from matmul and softmax: causal attention of the whole sequence with
// the kv heads repeated for their query heads.
at::Tensor dense_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t groups = q.size(1) / k.size(1), seq = q.size(2);
  const at::Tensor keys = k.repeat_interleave(groups, 1), values = v.repeat_interleave(groups, 1);
  const at::Tensor mask =
      at::full({seq, seq}, -std::numeric_limits<float>::infinity(), q.options().requires_grad(false)).triu(1);
  const at::Tensor scores =
      at::matmul(q, keys.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  return at::matmul(at::softmax(scores + mask, -1), values);
}

void expect_close(const at::Tensor& ours, const at::Tensor& dense, const char* what) {
  ASSERT_EQ(ours.sizes(), dense.sizes()) << what;
  const double diff = (ours - dense).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * std::max(1.0, dense.abs().max().item<double>())) << what << " max diff " << diff;
}

}  // namespace

// (load-balanced chunks, kv heads of 4 query heads)
class RingAttentionParity : public testing::TestWithParam<std::tuple<bool, int64_t>> {};

TEST_P(RingAttentionParity, OutputAndGradientsMatchWholeSequence) {
  const auto [load_balanced, kv_heads] = GetParam();
  auto cp = atl::test::MpiTestEnv::runtime().world();
  const int size = cp->size(), rank = cp->rank();
  const int64_t batch = 2, heads = 4, head_dim = 8, seq = 2 * size * 5;
  const at::Tensor q = shared_randn({batch, heads, seq, head_dim}, 1),
                   k = shared_randn({batch, kv_heads, seq, head_dim}, 2),
                   v = shared_randn({batch, kv_heads, seq, head_dim}, 3),
                   up = shared_randn({batch, heads, seq, head_dim}, 4);

  at::Tensor dense_q = leaf(q), dense_k = leaf(k), dense_v = leaf(v);
  const at::Tensor dense_out = dense_causal_attention(dense_q, dense_k, dense_v);
  (dense_out * up).sum().backward();

  const auto local = [&](const at::Tensor& full) {
    return take_context_chunks(full, 2, size, rank, load_balanced);
  };
  at::Tensor ring_q = leaf(local(q)), ring_k = leaf(local(k)), ring_v = leaf(local(v));
  const at::Tensor out = ring_attention(ring_q, ring_k, ring_v, *cp, load_balanced);
  (out * local(up)).sum().backward();

  expect_close(out, local(dense_out), "output");
  expect_close(ring_q.grad(), local(dense_q.grad()), "dQ");
  expect_close(ring_k.grad(), local(dense_k.grad()), "dK (summed over the ring and brought home)");
  expect_close(ring_v.grad(), local(dense_v.grad()), "dV (summed over the ring and brought home)");
}

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttentionParity,
                         testing::Combine(testing::Bool(), testing::Values<int64_t>(4, 2)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Balanced" : "Contiguous") +
                                  (std::get<1>(info.param) == 4 ? "Mha" : "Gqa");
                         });

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
