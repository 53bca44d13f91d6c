// The gradient and optimizer kernel levers as parallelize resolves them (runtime/parallelize.h):
// auto on for a GPU and off for the CPU, off where what a lever builds on is off, the start-up line
// saying so, and one line refusing an explicit true that the CPU leaves nothing to build on. A
// c10::Device value stands in for the GPU: nothing is asked of the device itself.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/parallelize.h"

namespace atl::runtime {
namespace {

const c10::Device kCpu(c10::kCPU);
const c10::Device kGpu(c10::kCUDA, 0);

Config with(const std::vector<std::string>& overrides) {
  return parse_config("", overrides);
}

std::string line_of(const std::vector<std::string>& overrides, c10::Device device) {
  const Config config = with(overrides);
  return kernels_line(config, resolve_kernels(config, device));
}

// The one problem resolve_kernels throws (empty when it resolves).
std::vector<std::string> refusal(const std::vector<std::string>& overrides, c10::Device device) {
  try {
    resolve_kernels(with(overrides), device);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

bool all_on(const KernelLevers& l) {
  return l.fused_adamw && l.fused_clip && l.first_grad_copy && l.fused_weight_grad;
}
bool all_off(const KernelLevers& l) {
  return !l.fused_adamw && !l.fused_clip && !l.first_grad_copy && !l.fused_weight_grad;
}

TEST(KernelLevers, AutoResolvesQuietlyOnForAGpuAndOffForTheCpu) {
  EXPECT_TRUE(all_on(resolve_kernels(with({}), kGpu)));
  EXPECT_TRUE(all_off(resolve_kernels(with({}), kCpu)));
  // Where what a lever builds on is off, auto is off too.
  const KernelLevers zero2 = resolve_kernels(with({"parallel.zero=2"}), kGpu);
  EXPECT_TRUE(zero2.fused_adamw && zero2.fused_clip);
  EXPECT_FALSE(zero2.first_grad_copy || zero2.fused_weight_grad);
  const KernelLevers partners_off =
      resolve_kernels(with({"kernels.fused_adamw=false", "kernels.first_grad_copy=false"}), kGpu);
  EXPECT_TRUE(all_off(partners_off));
  const KernelLevers zero3 = resolve_kernels(with({"parallel.zero=3"}), kGpu);
  EXPECT_TRUE(zero3.fused_adamw && zero3.fused_clip);
  EXPECT_FALSE(zero3.first_grad_copy || zero3.fused_weight_grad);
}

// The start-up line's wording: each lever on or off, "(auto)" where it was auto, and why where what
// it builds on kept it off.
TEST(KernelLevers, TheStartUpLineSaysWhatAutoResolvedToAndWhy) {
  EXPECT_EQ(
      line_of({"parallel.zero=2", "kernels.fused_adamw=false"}, kGpu),
      "kernels: fused_adamw off, fused_clip off (auto: without fused_adamw), first_grad_copy off (auto: "
      "parallel.zero = 2), fused_weight_grad off (auto: without first_grad_copy)");
}

// Every lever works on the CPU when forced (the parity tests compare it there bit for bit).
TEST(KernelLevers, ExplicitTrueAppliesOnTheCpu) {
  const KernelLevers forced = resolve_kernels(
      with({"kernels.fused_adamw=true", "kernels.fused_clip=true", "kernels.first_grad_copy=true",
            "kernels.fused_weight_grad=true", "parallel.zero=1"}),
      kCpu);
  EXPECT_TRUE(all_on(forced));
  const KernelLevers clip =
      resolve_kernels(with({"kernels.fused_adamw=true", "kernels.fused_clip=true"}), kCpu);
  EXPECT_TRUE(clip.fused_adamw && clip.fused_clip);
  EXPECT_FALSE(clip.first_grad_copy || clip.fused_weight_grad);
}

// An explicit true whose partner is auto applies on a GPU and is refused on the CPU, one line each.
TEST(KernelLevers, ExplicitTrueOverAnAutoPartnerOnTheCpuSaysSo) {
  const std::vector<std::string> clip = {"kernels.fused_clip=true"};
  EXPECT_EQ(
      refusal(clip, kCpu),
      std::vector<std::string>{
          "config: kernels.fused_clip = true cannot apply on the CPU with kernels.fused_adamw = auto (off on "
          "the CPU; clipping's scale is applied inside the fused AdamW kernel); set kernels.fused_adamw: "
          "true, or kernels.fused_clip to auto or false"});
  EXPECT_TRUE(refusal(clip, kGpu).empty());
  EXPECT_TRUE(resolve_kernels(with(clip), kGpu).fused_clip);

  const std::vector<std::string> weight = {"kernels.fused_weight_grad=true"};
  EXPECT_EQ(
      refusal(weight, kCpu),
      std::vector<std::string>{
          "config: kernels.fused_weight_grad = true cannot apply on the CPU with kernels.first_grad_copy "
          "= auto (off on the CPU; the weight gradients are written into the buffer the first gradient "
          "copy fills); set kernels.first_grad_copy: true, or kernels.fused_weight_grad to auto or false"});
  EXPECT_TRUE(refusal(weight, kGpu).empty());
  EXPECT_TRUE(resolve_kernels(with(weight), kGpu).fused_weight_grad);

  // Both at once: a line each.
  EXPECT_EQ(refusal({"kernels.fused_clip=true", "kernels.fused_weight_grad=true"}, kCpu).size(), 2u);
  // At ZeRO-2 the stage is the reason, which validate_layout reports once (not here again).
  const std::vector<std::string> zero2 = {"kernels.fused_weight_grad=true", "parallel.zero=2"};
  EXPECT_TRUE(refusal(zero2, kCpu).empty());
  EXPECT_EQ(validate_layout(with(zero2), with(zero2).job_ranks()).size(), 1u);
}

// The model's own CUDA kernels forced on the CPU are refused, one line each; auto stays quiet there,
// and on a GPU true applies.
TEST(KernelLevers, TheModelsCudaKernelsForcedOnTheCpuAreRefused) {
  for (const std::string name : {"fused_swiglu", "fused_rope", "fused_cross_entropy"}) {
    SCOPED_TRACE(name);
    const std::vector<std::string> forced = {"kernels." + name + "=true"};
    EXPECT_EQ(
        refusal(forced, kCpu),
        std::vector<std::string>{"config: kernels." + name +
                                 " = true cannot apply on the CPU (it is a CUDA kernel of Atoll's own); set "
                                 "it to auto (on a GPU, off on the CPU) or false, or run.device: cuda"});
    EXPECT_TRUE(refusal(forced, kGpu).empty());
    EXPECT_TRUE(refusal({"kernels." + name + "=auto"}, kCpu).empty());
  }
  EXPECT_EQ(refusal({"kernels.fused_swiglu=true", "kernels.fused_rope=true"}, kCpu).size(), 2u);
}

// fused_cross_entropy takes whole vocabulary rows: true at tp > 1 is refused by the config alone.
TEST(KernelLevers, FusedCrossEntropyForcedUnderTensorParallelismIsRefused) {
  const Config tp2 = with({"kernels.fused_cross_entropy=true", "parallel.tp=2"});
  const std::vector<std::string> problems = validate_layout(tp2, tp2.job_ranks());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(
      problems[0],
      "config: kernels.fused_cross_entropy = true cannot apply at parallel.tp = 2 (the kernels take whole "
      "vocabulary rows; tensor parallelism splits them over ranks and takes the vocabulary-parallel "
      "loss); set it to auto or false, or parallel.tp to 1");
  const Config tp2_auto = with({"parallel.tp=2"});
  EXPECT_TRUE(validate_layout(tp2_auto, tp2_auto.job_ranks()).empty());
}

}  // namespace
}  // namespace atl::runtime
