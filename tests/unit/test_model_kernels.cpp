// kernels.fused_rms_norm: at::rms_norm (one fused kernel each way on a GPU where LibTorch has one)
// computes the RMSNorm the model's composed version computes -- Hugging Face's, statistics in fp32 --
// values and gradients, here on the CPU in fp32 and bf16.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/model/llama.h"

TEST(ModelKernels, FusedRmsNormMatchesTheComposedOne) {
  torch::manual_seed(5);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const auto options = at::TensorOptions().dtype(dtype);
    const at::Tensor x = (at::randn({3, 7, 64}) * 3).to(dtype).requires_grad_(true);
    const at::Tensor weight = (1 + 0.1 * at::randn({64})).to(dtype).requires_grad_(true);
    const at::Tensor composed = atl::runtime::rms_normalize(x, weight, 1e-5);
    const at::Tensor fused = at::rms_norm(x, {64}, weight, 1e-5);
    ASSERT_EQ(fused.scalar_type(), dtype);
    // bf16: the two round the product with the weight in a different order (one bf16 ulp apart).
    const double tolerance = dtype == at::kFloat ? 1e-5 : 2e-2;
    EXPECT_LT((composed.to(at::kFloat) - fused.to(at::kFloat)).abs().max().item<double>(), tolerance);
    const at::Tensor w = at::randn(composed.sizes(), options);
    const auto dc = torch::autograd::grad({(composed.to(at::kFloat) * w.to(at::kFloat)).sum()}, {x, weight});
    const auto df = torch::autograd::grad({(fused.to(at::kFloat) * w.to(at::kFloat)).sum()}, {x, weight});
    for (size_t i = 0; i < 2; ++i) {
      const double scale = dc[i].to(at::kFloat).abs().max().item<double>();
      EXPECT_LT((dc[i].to(at::kFloat) - df[i].to(at::kFloat)).abs().max().item<double>(), tolerance * scale)
          << at::toString(dtype) << " gradient " << i;
    }
  }
}
