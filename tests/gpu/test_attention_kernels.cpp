// kernels.attention on the GPU (runtime/model/sdpa_backend.h): each fused attention kernel put first
// in SDPA's order is the one SDPA then picks where it takes the shapes (flash attention 2 and the
// memory-efficient kernel take causal bf16 attention of head_dim 64 on any sm80+ GPU; cuDNN's depends
// on the cuDNN LibTorch ships, so the test prints which ran), and every one of them computes causal
// attention forward and backward within bf16 rounding of an fp32 reference -- with the kv heads
// grouped inside SDPA too. The order is restored after each case.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "runtime/model/attention.h"
#include "runtime/model/sdpa_backend.h"

namespace {

using atl::runtime::sdpa_backend_name;
using atl::runtime::sdpa_choice;

struct Case {
  at::SDPBackend preferred;
  int64_t kv_heads;  // of 8 query heads
};

class AttentionKernel : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    for (const at::SDPBackend backend : at::globalContext().sDPPriorityOrder())
      saved_order_.push_back(static_cast<int64_t>(backend));
  }
  void TearDown() override { at::globalContext().setSDPPriorityOrder(saved_order_); }

 private:
  std::vector<int64_t> saved_order_;
};

// Largest |a - b| over the largest |b|: the error relative to the tensor's scale.
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor reference = b.to(at::kDouble);
  return (a.to(at::kDouble) - reference).abs().max().item<double>() / reference.abs().max().item<double>();
}

TEST_P(AttentionKernel, PreferredKernelRunsAndMatchesAnFp32Reference) {
  const Case c = GetParam();
  const c10::Device gpu(at::kCUDA, 0);
  const int64_t batch = 2, heads = 8, seq = 512, head_dim = 64;
  atl::runtime::prefer_sdpa_backend(c.preferred, gpu);
  EXPECT_EQ(at::globalContext().sDPPriorityOrder()[0], c.preferred);
  const at::SDPBackend chosen = sdpa_choice(gpu, at::kBFloat16, heads, c.kv_heads, seq, head_dim);
  std::cout << "preferred " << sdpa_backend_name(c.preferred) << ", " << heads << " heads over " << c.kv_heads
            << " kv heads: SDPA runs " << sdpa_backend_name(chosen) << "\n";
  const bool grouped = c.kv_heads != heads;
  if (c.preferred != at::SDPBackend::cudnn_attention) {
    EXPECT_EQ(chosen, c.preferred);
  }
  EXPECT_NE(chosen, at::SDPBackend::math);  // a fused kernel, whichever

  at::manual_seed(5);
  const auto fp32 = at::TensorOptions().device(gpu).dtype(at::kFloat);
  const at::Tensor q0 = at::randn({batch, heads, seq, head_dim}, fp32);
  const at::Tensor k0 = at::randn({batch, c.kv_heads, seq, head_dim}, fp32);
  const at::Tensor v0 = at::randn({batch, c.kv_heads, seq, head_dim}, fp32);
  const at::Tensor d_out = at::randn({batch, heads, seq, head_dim}, fp32);

  const at::Tensor q = q0.to(at::kBFloat16).requires_grad_(), k = k0.to(at::kBFloat16).requires_grad_(),
                   v = v0.to(at::kBFloat16).requires_grad_();
  const at::Tensor out = grouped ? atl::runtime::grouped_causal_attention(q, k, v)
                                 : at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  out.backward(d_out.to(at::kBFloat16));

  // The reference: the hand-written kernel in fp32 on the bf16 inputs, kv heads repeated.
  const int64_t group = heads / c.kv_heads;
  const at::Tensor qr = q.detach().to(at::kFloat).requires_grad_();
  const at::Tensor kr = k.detach().to(at::kFloat).requires_grad_(),
                   vr = v.detach().to(at::kFloat).requires_grad_();
  const at::Tensor reference = atl::runtime::handwritten_causal_attention(
      qr, kr.repeat_interleave(group, 1), vr.repeat_interleave(group, 1),
      atl::runtime::causal_mask(seq, at::kFloat).to(gpu));
  reference.backward(d_out);

  EXPECT_LT(relative_error(out.detach(), reference.detach()), 2e-2);
  EXPECT_LT(relative_error(q.grad(), qr.grad()), 3e-2);
  EXPECT_LT(relative_error(k.grad(), kr.grad()), 3e-2);
  EXPECT_LT(relative_error(v.grad(), vr.grad()), 3e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, AttentionKernel,
    ::testing::Values(Case{at::SDPBackend::flash_attention, 8}, Case{at::SDPBackend::efficient_attention, 8},
                      Case{at::SDPBackend::cudnn_attention, 8}, Case{at::SDPBackend::flash_attention, 2},
                      Case{at::SDPBackend::cudnn_attention, 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return sdpa_backend_name(info.param.preferred) + "_kv" + std::to_string(info.param.kv_heads);
    });

}  // namespace
