// The fused SwiGLU, RoPE and cross-entropy kernels (runtime/model/fused_ops.h) against the ATen
// chains they replace, on the GPU, forward and backward through autograd, in fp32 and bf16, on
// shapes that take the 16-byte path and shapes that take the one-element path: RoPE both ways and
// SwiGLU's forward bit for bit; SwiGLU's backward within one rounding of the element type (nvcc may
// fuse a multiply-add of silu's derivative differently from LibTorch's build), printing how many
// differ; the cross-entropy within fp32 rounding (its sums in another order).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>

#include "runtime/model/fused_ops.h"
#include "runtime/model/llama.h"

namespace {

using atl::runtime::apply_rope;
using atl::runtime::fused_cross_entropy;
using atl::runtime::fused_rope;
using atl::runtime::fused_swiglu;

at::TensorOptions on_gpu(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(at::kCUDA, 0);
}

// Bitwise equality that also holds for NaN-free tensors of any float dtype.
void expect_bitwise(const at::Tensor& fused, const at::Tensor& chain, const std::string& what) {
  ASSERT_EQ(fused.sizes(), chain.sizes()) << what;
  EXPECT_TRUE(at::equal(fused, chain))
      << what << ": " << at::ne(fused, chain).sum().item<int64_t>() << " of " << chain.numel()
      << " elements differ, largest by "
      << (fused.to(at::kDouble) - chain.to(at::kDouble)).abs().max().item<double>();
}

struct Case {
  at::ScalarType dtype;
  int64_t rows, width;  // SwiGLU: [rows, width]; width 7 takes the one-element path
};

class FusedSwiGlu : public ::testing::TestWithParam<Case> {};

TEST_P(FusedSwiGlu, MatchesSiluTimesUpBothWays) {
  const Case c = GetParam();
  at::manual_seed(11);
  const at::Tensor gate0 = (3 * at::randn({c.rows, c.width}, on_gpu(at::kFloat))).to(c.dtype);
  const at::Tensor up0 = at::randn({c.rows, c.width}, on_gpu(at::kFloat)).to(c.dtype);
  const at::Tensor d_out = at::randn({c.rows, c.width}, on_gpu(at::kFloat)).to(c.dtype);

  const at::Tensor gate_a = gate0.clone().requires_grad_(), up_a = up0.clone().requires_grad_();
  const at::Tensor chain = at::silu(gate_a) * up_a;
  chain.backward(d_out);
  const at::Tensor gate_b = gate0.clone().requires_grad_(), up_b = up0.clone().requires_grad_();
  const at::Tensor fused = fused_swiglu(gate_b, up_b);
  fused.backward(d_out);

  expect_bitwise(fused.detach(), chain.detach(), "forward");
  expect_bitwise(up_b.grad(), up_a.grad(), "d_up");
  // d_gate: one rounding of the element type at most, relative to the larger of the two.
  const double ulp = c.dtype == at::kBFloat16 ? 1.0 / 128 : 1.0 / (1 << 23);
  const at::Tensor a = gate_b.grad().to(at::kDouble), b = gate_a.grad().to(at::kDouble);
  const at::Tensor excess = (a - b).abs() - ulp * at::maximum(a.abs(), b.abs());
  EXPECT_LE(excess.max().item<double>(), 0.0) << "d_gate differs by more than one rounding";
  std::cout << "fused swiglu d_gate: " << at::ne(gate_b.grad(), gate_a.grad()).sum().item<int64_t>() << " of "
            << a.numel() << " elements differ from the ATen chain (" << c10::toString(c.dtype) << ")"
            << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedSwiGlu,
                         ::testing::Values(Case{at::kBFloat16, 96, 256}, Case{at::kFloat, 96, 256},
                                           Case{at::kBFloat16, 5, 7}, Case{at::kFloat, 5, 7}));

class FusedRope : public ::testing::TestWithParam<Case> {};

// rows: heads; width: head_dim (64 takes the 16-byte path, 6 the one-element path).
TEST_P(FusedRope, MatchesTheRotateHalfChainBothWays) {
  const Case c = GetParam();
  const int64_t batch = 3, seq = 40, heads = c.rows, head_dim = c.width;
  atl::runtime::ModelConfig model;
  model.dim = static_cast<int>(heads * head_dim);
  model.heads = static_cast<int>(heads);
  model.seq = 64;
  model.rope_theta = 500000;
  const auto [cos_all, sin_all] = atl::runtime::rope_tables(model, c.dtype, at::Device(at::kCUDA, 0));
  const at::Tensor cos = cos_all.narrow(0, 0, seq), sin = sin_all.narrow(0, 0, seq);
  at::manual_seed(12);
  // As the model makes q: a linear layer's [batch, seq, heads * head_dim] viewed by head.
  const at::Tensor x0 = at::randn({batch, seq, heads * head_dim}, on_gpu(at::kFloat)).to(c.dtype);
  const at::Tensor d_out = at::randn({batch, heads, seq, head_dim}, on_gpu(at::kFloat)).to(c.dtype);
  const auto by_head = [&](const at::Tensor& t) {
    return t.view({batch, seq, heads, head_dim}).transpose(1, 2);
  };

  const at::Tensor x_a = x0.clone().requires_grad_(), x_b = x0.clone().requires_grad_();
  const at::Tensor chain = apply_rope(by_head(x_a), cos, sin);
  chain.backward(d_out);
  ASSERT_TRUE(atl::runtime::fused_rope_takes(by_head(x_b), cos, sin));
  const at::Tensor fused = fused_rope(by_head(x_b), cos, sin);
  fused.backward(d_out);

  EXPECT_EQ(fused.strides(), chain.strides()) << "the rotated q keeps the layout the chain gives it";
  expect_bitwise(fused.detach(), chain.detach(), "forward");
  expect_bitwise(x_b.grad(), x_a.grad(), "backward");
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedRope,
                         ::testing::Values(Case{at::kBFloat16, 4, 64}, Case{at::kFloat, 4, 64},
                                           Case{at::kBFloat16, 3, 6}, Case{at::kFloat, 3, 6}));

struct LossCase {
  at::ScalarType dtype;
  int64_t rows, vocab, padded;  // logits [rows, padded] narrowed to vocab, as the model pads
};

class FusedCrossEntropy : public ::testing::TestWithParam<LossCase> {};

// Against at::cross_entropy_loss of the fp32 cast (LlamaModel::loss_of's chain), through autograd
// with an upstream gradient of 3: the loss within fp32 rounding of sums taken in another order, the
// logits' gradient within a rounding of their type; the padding columns get none.
TEST_P(FusedCrossEntropy, MatchesTheFp32ChainBothWays) {
  const LossCase c = GetParam();
  at::manual_seed(13);
  const at::Tensor logits0 = (4 * at::randn({c.rows, c.padded}, on_gpu(at::kFloat))).to(c.dtype);
  at::Tensor targets = at::randint(0, c.vocab, {c.rows}, on_gpu(at::kLong));
  targets[0] = 0;
  targets[c.rows - 1] = c.vocab - 1;

  const at::Tensor logits_a = logits0.clone().requires_grad_();
  const at::Tensor chain = at::cross_entropy_loss(logits_a.to(at::kFloat).narrow(1, 0, c.vocab), targets);
  (3 * chain).backward();
  const at::Tensor logits_b = logits0.clone().requires_grad_();
  ASSERT_TRUE(atl::runtime::fused_cross_entropy_takes(logits_b.narrow(1, 0, c.vocab), targets));
  const at::Tensor fused = fused_cross_entropy(logits_b.narrow(1, 0, c.vocab), targets);
  (3 * fused).backward();

  EXPECT_EQ(fused.scalar_type(), at::kFloat);
  EXPECT_NEAR(fused.item<double>(), chain.item<double>(), 1e-5 * std::abs(chain.item<double>()));
  const at::Tensor a = logits_a.grad().to(at::kDouble), b = logits_b.grad().to(at::kDouble);
  const double scale = a.abs().max().item<double>();
  const double allowed = (c.dtype == at::kBFloat16 ? 1.0 / 128 : 1e-5) * scale;
  const double largest = (a - b).abs().max().item<double>();
  std::cout << "fused cross-entropy " << at::toString(c.dtype) << " [" << c.rows << ", " << c.vocab
            << "]: loss " << fused.item<double>() << " vs " << chain.item<double>()
            << ", gradient largest difference " << largest << " of " << scale << std::endl;
  EXPECT_LE(largest, allowed);
  if (c.padded > c.vocab) {
    EXPECT_EQ(b.narrow(1, c.vocab, c.padded - c.vocab).abs().max().item<double>(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedCrossEntropy,
                         ::testing::Values(LossCase{at::kBFloat16, 257, 32000, 32000},
                                           LossCase{at::kBFloat16, 33, 1000, 1024},
                                           LossCase{at::kFloat, 33, 1000, 1024},
                                           LossCase{at::kBFloat16, 5, 1001, 1003},
                                           LossCase{at::kFloat, 5, 1001, 1003}));

TEST(FusedOps, RefuseWhatTheyDoNotTake) {
  const at::Tensor on_cpu = at::ones({4, 8});
  EXPECT_FALSE(atl::runtime::fused_swiglu_takes(on_cpu, on_cpu));
  EXPECT_THROW(fused_swiglu(on_cpu, on_cpu), std::invalid_argument);
  const at::Tensor contiguous_by_head = at::ones({1, 2, 4, 8}, on_gpu(at::kFloat));  // not a transposed view
  const at::Tensor table = at::ones({4, 8}, on_gpu(at::kFloat));
  EXPECT_FALSE(atl::runtime::fused_rope_takes(contiguous_by_head, table, table));
  const at::Tensor int32_targets = at::zeros({4}, on_gpu(at::kInt));
  EXPECT_FALSE(atl::runtime::fused_cross_entropy_takes(on_cpu, at::zeros({4}, at::kLong)));
  EXPECT_FALSE(atl::runtime::fused_cross_entropy_takes(at::ones({4, 8}, on_gpu(at::kFloat)), int32_targets));
  EXPECT_THROW(fused_cross_entropy(on_cpu, at::zeros({4}, at::kLong)), std::invalid_argument);
}

}  // namespace
