// SparseLoCo's top-k exchange: the codec keeps the k largest of every chunk (exactly with the codec
// none, all of them at k = 256), rejects corrupted messages, and the outer optimizer's error
// feedback conserves what was and was not sent.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "optim/outer/island_average.h"
#include "optim/outer/outer_optimizer.h"
#include "optim/outer/topk_codec.h"

namespace atl::optim::outer {
namespace {

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.numel() == b.numel() && at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

at::Tensor round_trip(const TopkEncoding& encoding, const at::Tensor& values) {
  const at::Tensor bytes = encode(encoding, values);
  EXPECT_EQ(bytes.numel(), encoded_bytes(encoding, values.numel()));
  return decode(encoding, bytes, values.numel());
}

TEST(TopkCodec, KeepsTheLargestOfEveryChunkExactly) {
  // Two full chunks and a tail of 44: each keeps its own largest magnitudes, whatever the others.
  at::manual_seed(3);
  const at::Tensor x = at::randn({2 * kTopkChunk + 44});
  const TopkEncoding encoding{5, Codec::kNone};
  const at::Tensor y = round_trip(encoding, x);
  EXPECT_EQ(y.ne(0).sum().item<int64_t>(), 3 * 5);
  for (int64_t first : {int64_t{0}, kTopkChunk, 2 * kTopkChunk}) {
    const int64_t length = std::min<int64_t>(kTopkChunk, x.numel() - first);
    const at::Tensor chunk = x.narrow(0, first, length), kept = y.narrow(0, first, length);
    const at::Tensor threshold = std::get<0>(chunk.abs().topk(5)).min();
    EXPECT_TRUE(at::equal(kept.ne(0), chunk.abs().ge(threshold))) << "chunk at " << first;
    EXPECT_TRUE(bitwise_equal(kept.masked_select(kept.ne(0)), chunk.masked_select(kept.ne(0))));
  }
}

TEST(TopkCodec, EveryElementKeptIsTheIdentityAndTiesGoToTheLowerPosition) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({1000});
  EXPECT_TRUE(bitwise_equal(round_trip({static_cast<int>(kTopkChunk), Codec::kNone}, x), x));
  // Equal magnitudes: the first positions win, on every machine.
  const at::Tensor ties = at::ones({kTopkChunk});
  const at::Tensor kept = round_trip({3, Codec::kNone}, ties);
  EXPECT_EQ(kept.narrow(0, 0, 3).sum().item<float>(), 3.0f);
  EXPECT_EQ(kept.narrow(0, 3, kTopkChunk - 3).abs().sum().item<float>(), 0.0f);
}

TEST(TopkCodec, BytesArePositionsPlusTheValueCodec) {
  // 1000 elements = 3 full chunks (4 each) + a tail of 232 (4): 16 positions and 16 values.
  EXPECT_EQ(topk_kept(4, 1000), 16);
  EXPECT_EQ(encoded_bytes(TopkEncoding{4, Codec::kNone}, 1000), 16 + 16 * 4);
  EXPECT_EQ(encoded_bytes(TopkEncoding{4, Codec::kInt8}, 1000), 16 + encoded_bytes(Codec::kInt8, 16));
  // A tail shorter than k keeps all of it.
  EXPECT_EQ(topk_kept(8, kTopkChunk + 3), 8 + 3);
  // Quantized values stay within the int8 bound of the kept values' range.
  at::manual_seed(5);
  const at::Tensor x = at::randn({4096});
  const at::Tensor exact = round_trip({8, Codec::kNone}, x), int8 = round_trip({8, Codec::kInt8}, x);
  const double range = (exact.max() - exact.min()).item<double>();
  EXPECT_LE((exact - int8).abs().max().item<double>(), range / 255.0 * 0.5 + 1e-6);
  EXPECT_TRUE(at::equal(exact.ne(0), int8.ne(0).logical_or(exact.ne(0))));
}

TEST(TopkCodec, RejectsNonFiniteInputAndCorruptedMessages) {
  at::Tensor x = at::randn({300});
  const TopkEncoding encoding{4, Codec::kNone};
  const at::Tensor bytes = encode(encoding, x);
  // Positions out of order within a chunk, or past the tail (300 = 256 + a tail of 44).
  at::Tensor swapped = bytes.clone();
  swapped[0] = bytes[1];
  swapped[1] = bytes[0];
  EXPECT_THROW(decode(encoding, swapped, 300), std::invalid_argument);
  at::Tensor past_tail = bytes.clone();
  past_tail[7] = 200;
  EXPECT_THROW(decode(encoding, past_tail, 300), std::invalid_argument);
  EXPECT_THROW(decode(encoding, bytes.narrow(0, 0, bytes.numel() - 1), 300), std::invalid_argument);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(encode(encoding, x), std::invalid_argument);
  EXPECT_THROW(encode(TopkEncoding{0, Codec::kNone}, at::ones({4})), std::invalid_argument);
}

// One island: the mean is what it sends, decoded as the others would decode it.
class OneIsland : public IslandAverage {
 public:
  explicit OneIsland(TopkEncoding encoding) : encoding_(encoding) {}
  int islands() const override { return 1; }
  int island() const override { return 0; }
  at::Tensor average(const at::Tensor& values, double, int) override {
    sent.push_back(values.clone());
    return decode(encoding_, encode(encoding_, values), values.numel());
  }
  std::vector<at::Tensor> group_average(const std::vector<at::Tensor>& tensors,
                                        const std::vector<int>&) override {
    return tensors;
  }
  void bound_norms(double) override {}
  const std::vector<LeftOut>& left_out() const override { return none_; }
  std::vector<at::Tensor> sent;  // what each round handed the exchange: pseudo-gradient + feedback

 private:
  TopkEncoding encoding_;
  std::vector<LeftOut> none_;
};

TEST(ErrorFeedback, ConservesWhatWasAndWasNotSent) {
  // Rounds of H = 1 with outer SGD(1, 0): each round's pseudo-gradient delta is set by moving theta.
  // Error feedback must make  sum(carried) + feedback == sum(delta)  after every round.
  const TopkEncoding encoding{2, Codec::kNone};
  OneIsland exchange(encoding);
  OuterOptions options;
  options.algorithm = Algorithm::kDiLoCo;
  options.inner_steps = 1;
  options.lr = 1.0;
  options.momentum = 0.0;
  options.nesterov = false;
  options.topk = encoding.k;
  options.compression = encoding.values;
  at::Tensor theta = at::zeros({600});
  OuterOptimizer outer(options, {theta}, {{ValueSpan{0, 600}}}, exchange);
  at::manual_seed(6);
  at::Tensor deltas = at::zeros({600}), carried = at::zeros({600});
  for (int64_t step = 1; step <= 6; ++step) {
    const at::Tensor delta = at::randn({600});
    theta.sub_(delta);  // theta = phi - delta
    deltas += delta;
    ASSERT_TRUE(outer.after_inner_step(step));
    carried += decode(encoding, encode(encoding, exchange.sent.back()), 600);
    EXPECT_TRUE(at::allclose(carried + outer.error_feedback(), deltas, 1e-5, 1e-5)) << "round " << step;
    // What was not carried is exactly the feedback: nothing is both sent and kept.
    EXPECT_EQ(
        (outer.error_feedback() * (exchange.sent.back() - outer.error_feedback())).abs().max().item<float>(),
        0.0f);
  }
  // Each round sends 2 of 256 per chunk: the feedback holds most of the mass, and phi moved by what
  // was carried only (outer SGD(1, 0) subtracts the mean).
  EXPECT_GT(outer.error_feedback().abs().sum().item<double>(), carried.abs().sum().item<double>());
  EXPECT_TRUE(at::allclose(outer.phi(), -carried, 1e-5, 1e-5));
}

TEST(ErrorFeedback, EveryElementKeptLeavesNoFeedbackAndIsPlainDiLoCo) {
  const TopkEncoding all{static_cast<int>(kTopkChunk), Codec::kNone};
  OuterOptions sparse_options, dense_options;
  sparse_options.algorithm = dense_options.algorithm = Algorithm::kDiLoCo;
  sparse_options.inner_steps = dense_options.inner_steps = 1;
  sparse_options.topk = all.k;
  sparse_options.compression = all.values;
  OneIsland sparse_exchange(all), dense_exchange(all);
  at::Tensor sparse_theta = at::zeros({300}), dense_theta = at::zeros({300});
  OuterOptimizer sparse(sparse_options, {sparse_theta}, {{ValueSpan{0, 300}}}, sparse_exchange);
  OuterOptimizer dense(dense_options, {dense_theta}, {{ValueSpan{0, 300}}}, dense_exchange);
  at::manual_seed(7);
  for (int64_t step = 1; step <= 4; ++step) {
    const at::Tensor delta = at::randn({300});
    sparse_theta.sub_(delta);
    dense_theta.sub_(delta);
    sparse.after_inner_step(step);
    dense.after_inner_step(step);
    EXPECT_EQ(sparse.error_feedback().abs().max().item<float>(), 0.0f);
    EXPECT_TRUE(bitwise_equal(sparse.phi(), dense.phi())) << "round " << step;
    EXPECT_TRUE(bitwise_equal(sparse.momentum(), dense.momentum())) << "round " << step;
  }
  EXPECT_FALSE(dense.error_feedback().defined());
}

}  // namespace
}  // namespace atl::optim::outer
