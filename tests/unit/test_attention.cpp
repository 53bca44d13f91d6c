// The hand-written causal attention, and the kernel causal_attention picks, against the composite
// LibTorch formulation: outputs and the gradients of q, k and v agree (to rounding in fp64, 1e-5
// relative in fp32).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "runtime/model/attention.h"
#include "runtime/model/sdpa_backend.h"

namespace {

at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& mask) {
  const at::Tensor scores =
      at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1))) + mask;
  return at::matmul(at::softmax(scores, -1), v);
}

using Attention = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&);

void compare(Attention attention, at::ScalarType dtype, double tolerance) {
  torch::manual_seed(3);
  const int64_t seq = 17;
  const at::Tensor mask =
      at::full({seq, seq}, -std::numeric_limits<double>::infinity(), at::TensorOptions().dtype(dtype))
          .triu(1);
  std::vector<at::Tensor> ours_in, ref_in;
  for (int i = 0; i < 3; ++i) {
    const at::Tensor x = at::randn({2, 3, seq, 8}, at::TensorOptions().dtype(dtype));
    ours_in.push_back(x.clone().requires_grad_(true));
    ref_in.push_back(x.clone().requires_grad_(true));
  }
  const at::Tensor upstream = at::randn({2, 3, seq, 8}, at::TensorOptions().dtype(dtype));
  const at::Tensor ours = attention(ours_in[0], ours_in[1], ours_in[2], mask);
  const at::Tensor ref = reference_attention(ref_in[0], ref_in[1], ref_in[2], mask);
  (ours * upstream).sum().backward();
  (ref * upstream).sum().backward();
  auto relative = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a - b).abs().max() / b.abs().max()).item<double>();
  };
  EXPECT_LT(relative(ours, ref), tolerance);
  const char* names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) EXPECT_LT(relative(ours_in[i].grad(), ref_in[i].grad()), tolerance) << names[i];
  // Causality: the first position sees only itself, so its output is v at position 0.
  EXPECT_LT(relative(ours.select(2, 0), ours_in[2].select(2, 0)), tolerance);
}

}  // namespace

TEST(CausalAttention, HandWrittenMatchesCompositeFormulationInDouble) {
  compare(atl::runtime::handwritten_causal_attention, at::kDouble, 1e-12);
}
TEST(CausalAttention, HandWrittenMatchesCompositeFormulationInFloat) {
  compare(atl::runtime::handwritten_causal_attention, at::kFloat, 1e-5);
}
TEST(CausalAttention, ChosenKernelMatchesCompositeFormulationInFloat) {
  ASSERT_TRUE(atl::runtime::fused_attention_is_faster(at::kFloat, 17));  // the fused kernel, here
  compare(atl::runtime::causal_attention, at::kFloat, 1e-5);
}
TEST(CausalAttention, FusedOnlyWhereMeasuredFaster) {
  EXPECT_TRUE(atl::runtime::fused_attention_is_faster(at::kFloat, 256));
  EXPECT_FALSE(atl::runtime::fused_attention_is_faster(at::kBFloat16, 256));
  EXPECT_FALSE(atl::runtime::fused_attention_is_faster(at::kBFloat16, 512));
  EXPECT_TRUE(atl::runtime::fused_attention_is_faster(at::kBFloat16, 1024));
}

// kernels.native_gqa: the kv heads shared inside SDPA give what repeating them gives, values and
// gradients (here on the CPU; the GPU suite runs it inside the model).
TEST(CausalAttention, GroupedKernelMatchesRepeatedKvHeads) {
  torch::manual_seed(4);
  const int64_t seq = 19, heads = 6, kv_heads = 2;
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({2, heads, seq, 8}, options).requires_grad_(true);
  const at::Tensor k = at::randn({2, kv_heads, seq, 8}, options).requires_grad_(true);
  const at::Tensor v = at::randn({2, kv_heads, seq, 8}, options).requires_grad_(true);
  const at::Tensor grouped = atl::runtime::grouped_causal_attention(q, k, v);
  const at::Tensor mask = atl::runtime::causal_mask(seq, at::kDouble);
  const at::Tensor repeated = reference_attention(q, k.repeat_interleave(heads / kv_heads, 1),
                                                  v.repeat_interleave(heads / kv_heads, 1), mask);
  EXPECT_LT((grouped - repeated).abs().max().item<double>(), 1e-12);
  const at::Tensor w = at::randn(grouped.sizes(), options);
  const auto dg = torch::autograd::grad({(grouped * w).sum()}, {q, k, v});
  const auto dr = torch::autograd::grad({(repeated * w).sum()}, {q, k, v});
  for (size_t i = 0; i < 3; ++i) EXPECT_LT((dg[i] - dr[i]).abs().max().item<double>(), 1e-12) << i;
}

// kernels.attention: the preferred kernel goes first in SDPA's process-wide order, the others after
// it in their order before (the GPU suite's test_attention_kernels checks which then runs on a GPU).
TEST(SdpaBackend, PreferredKernelGoesFirstTheOthersKeepTheirOrder) {
  at::Context& context = at::globalContext();
  const auto before = context.sDPPriorityOrder();
  atl::runtime::prefer_sdpa_backend(at::SDPBackend::cudnn_attention, c10::Device(at::kCPU));
  const auto after = context.sDPPriorityOrder();
  std::vector<int64_t> saved;
  for (const at::SDPBackend backend : before) saved.push_back(static_cast<int64_t>(backend));
  context.setSDPPriorityOrder(saved);

  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(after[0], at::SDPBackend::cudnn_attention);
  std::vector<at::SDPBackend> rest_before, rest_after(after.begin() + 1, after.end());
  for (const at::SDPBackend backend : before)
    if (backend != at::SDPBackend::cudnn_attention) rest_before.push_back(backend);
  EXPECT_EQ(rest_after, rest_before);
}

// The start-up line's question, asked on the CPU: LibTorch's CPU flash kernel takes causal fp32
// attention with or without grouped kv heads, and document-masked attention's boolean mask.
TEST(SdpaBackend, ChoiceNamesTheKernelSdpaRuns) {
  const c10::Device cpu(at::kCPU);
  EXPECT_EQ(atl::runtime::sdpa_choice(cpu, at::kFloat, 4, 4, 64, 16), at::SDPBackend::flash_attention);
  EXPECT_EQ(atl::runtime::sdpa_choice(cpu, at::kBFloat16, 4, 2, 64, 16, /*document_mask=*/true),
            at::SDPBackend::flash_attention);
  EXPECT_EQ(atl::runtime::sdpa_backend_name(atl::runtime::sdpa_choice(cpu, at::kFloat, 4, 2, 64, 16)),
            "flash_attention");
  EXPECT_EQ(atl::runtime::sdpa_backend_name(at::SDPBackend::cudnn_attention), "cudnn_attention");
}
