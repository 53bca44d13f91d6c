// The losses never make the host wait for the GPU: each runs forward and backward with LibTorch's
// sync debug mode set to error, under which any synchronising CUDA call (a .item(), a blocking copy
// to the host) throws. A host wait inside a microbatch would keep the host from queueing the next
// kernels while the GPU drains; under tensor parallelism the vocabulary-parallel loss runs once per
// microbatch. Each loss is also checked against at::cross_entropy_loss, outside the mode.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "comm/single_rank_communicator.h"
#include "parallel/tensor_parallel.h"
#include "runtime/model/fused_ops.h"

namespace {

at::TensorOptions on_gpu(at::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(at::kCUDA, 0);
}

// While one lives, every synchronising CUDA call throws c10::Error.
class SyncsAreErrors {
 public:
  SyncsAreErrors() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR); }
  ~SyncsAreErrors() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
  SyncsAreErrors(const SyncsAreErrors&) = delete;
  SyncsAreErrors& operator=(const SyncsAreErrors&) = delete;
};

constexpr int64_t kRows = 96, kVocab = 100, kPadded = 128;

// Logits over a padded vocabulary, and targets; `ignored` of them -100 (which the vocabulary-parallel
// loss skips; the fused one is only ever given token ids).
std::pair<at::Tensor, at::Tensor> a_batch(at::ScalarType dtype, int64_t ignored) {
  at::manual_seed(17);
  const at::Tensor logits = (4 * at::randn({kRows, kPadded}, on_gpu(at::kFloat))).to(dtype);
  at::Tensor targets = at::randint(0, kVocab, {kRows}, on_gpu(at::kLong));
  targets.narrow(0, 0, ignored).fill_(-100);
  return {logits, targets};
}

// The reference: at::cross_entropy_loss of the real columns in fp32, and the logits' gradient.
std::pair<double, at::Tensor> reference(const at::Tensor& logits0, const at::Tensor& targets) {
  const at::Tensor logits = logits0.clone().requires_grad_();
  const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat).narrow(1, 0, kVocab), targets);
  loss.backward();
  return {loss.item<double>(), logits.grad().to(at::kDouble)};
}

double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b).abs().max().item<double>();
}

// The mode is really on: without this, the cases below could pass with it silently off.
TEST(HostSyncs, TheModeCatchesAnItem) {
  const at::Tensor x = at::ones({4}, on_gpu(at::kFloat));
  SyncsAreErrors syncs_are_errors;
  EXPECT_THROW(x.sum().item<float>(), c10::Error);
}

TEST(HostSyncs, VocabParallelLossNeverWaitsForTheHost) {
  const auto [logits0, targets] = a_batch(at::kFloat, 5);
  atl::comm::SingleRankCommunicator tp;
  const at::Tensor logits = logits0.clone().requires_grad_();
  at::Tensor loss;
  {
    SyncsAreErrors syncs_are_errors;
    ASSERT_NO_THROW({
      loss = atl::parallel::vocab_parallel_cross_entropy(logits, targets, 0, kVocab, tp);
      loss.backward();
    });
  }
  const auto [expected, expected_grad] = reference(logits0, targets);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-5 * std::abs(expected));
  EXPECT_LT(largest_difference(logits.grad().narrow(1, 0, kVocab), expected_grad.narrow(1, 0, kVocab)), 1e-6);
  EXPECT_EQ(logits.grad().narrow(1, kVocab, kPadded - kVocab).abs().max().item<float>(), 0.0f)
      << "the padding columns get no gradient";
}

TEST(HostSyncs, FusedLossNeverWaitsForTheHost) {
  const auto [logits0, targets] = a_batch(at::kBFloat16, 0);
  const at::Tensor logits = logits0.clone().requires_grad_();
  ASSERT_TRUE(atl::runtime::fused_cross_entropy_takes(logits.narrow(1, 0, kVocab), targets));
  at::Tensor loss;
  {
    SyncsAreErrors syncs_are_errors;
    ASSERT_NO_THROW({
      loss = atl::runtime::fused_cross_entropy(logits.narrow(1, 0, kVocab), targets);
      loss.backward();
    });
  }
  const auto [expected, expected_grad] = reference(logits0, targets);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-5 * std::abs(expected));
  // The gradient in bf16: within a rounding of its largest entries (1/kRows at most).
  EXPECT_LT(largest_difference(logits.grad().narrow(1, 0, kVocab), expected_grad.narrow(1, 0, kVocab)), 1e-4);
}

}  // namespace
