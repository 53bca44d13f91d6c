// The kernels section: its rows of the field table and the rules on levers that depend on another
// setting.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> kernels_fields() {
  const SectionFields<KernelsConfig> kernels{"kernels", &Config::kernels};
  return {
      kernels("fused_adamw", &KernelsConfig::fused_adamw,
              "AdamW as ATen's fused multi-tensor kernel; auto: on a GPU."),
      kernels("fused_clip", &KernelsConfig::fused_clip,
              "Gradient clipping inside fused AdamW (its grad_scale) instead of a pass of its own; "
              "with fused AdamW only; auto: on a GPU."),
      kernels("first_grad_copy", &KernelsConfig::first_grad_copy,
              "Each parameter's first gradient of a step copied into the gradient buffer instead of "
              "zeroing it and adding: the same sums, two passes fewer; ZeRO 0-1 only; auto: on a GPU."),
      kernels("fused_weight_grad", &KernelsConfig::fused_weight_grad,
              "Decoder layers' weight gradients written by their matrix product into the gradient "
              "buffer instead of copied there (under bf16 unrounded); where first_grad_copy is on, not "
              "under train.precision fp8; auto: on a GPU."),
      kernels("fused_rms_norm", &KernelsConfig::fused_rms_norm,
              "RMSNorm as at::rms_norm's fused kernel; auto: on a GPU."),
      kernels("native_gqa", &KernelsConfig::native_gqa,
              "Grouped-query attention inside SDPA instead of repeated kv heads; auto: on a GPU."),
      kernels("fused_swiglu", &KernelsConfig::fused_swiglu,
              "SwiGLU's silu and product as one CUDA kernel each way, the same values; auto: on a GPU."),
      kernels("fused_rope", &KernelsConfig::fused_rope,
              "RoPE as one CUDA kernel each way, the same values; auto: on a GPU."),
      kernels("fused_cross_entropy", &KernelsConfig::fused_cross_entropy,
              "The loss as two CUDA kernels over the logits in their own type (no fp32 copy), "
              "the same value up to the order of fp32 sums; tp = 1 only; auto: on a GPU."),
      kernels("attention", &KernelsConfig::attention,
              "The fused attention kernel SDPA tries first on a GPU (flash attention 2, cuDNN's, "
              "memory-efficient), the next where it cannot take the shapes; auto: LibTorch's order."),
  };
}

// The kernel levers that depend on another setting: an explicit true the config alone rules out.
// (What also needs the device -- a partner left at auto, off on the CPU -- parallelize's
// resolve_kernels refuses.) auto resolves quietly to off in each case.
void validate_kernels(const Config& c, Problems& problems) {
  const KernelsConfig& k = c.kernels;
  const int zero = c.parallel.zero;
  if (k.first_grad_copy == KernelChoice::kOn && zero >= 2)
    problems.push_back(
        "config: kernels.first_grad_copy = true cannot apply at parallel.zero = " + std::to_string(zero) +
        " (the first gradient copy lands in the ZeRO-0/1 flat buffer); set it to auto or "
        "false, or parallel.zero to 0 or 1");
  if (k.fused_weight_grad == KernelChoice::kOn && zero >= 2)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply at parallel.zero = " + std::to_string(zero) +
        " (the weight gradients are written into the ZeRO-0/1 flat buffer, with "
        "kernels.first_grad_copy); set it to auto or false, or parallel.zero to 0 or 1");
  else if (k.fused_weight_grad == KernelChoice::kOn && c.train.precision == Precision::kFp8)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply with train.precision = fp8 (the FP8 weight "
        "gradient reaches the buffer through autograd); set it to auto or false, or train.precision to "
        "bf16");
  else if (k.fused_weight_grad == KernelChoice::kOn && k.first_grad_copy == KernelChoice::kOff)
    problems.push_back(
        "config: kernels.fused_weight_grad = true cannot apply with kernels.first_grad_copy = false (the "
        "weight gradients are written into the buffer the first gradient copy fills); set "
        "kernels.first_grad_copy: true, or kernels.fused_weight_grad to auto or false");
  if (k.fused_cross_entropy == KernelChoice::kOn && c.parallel.tp > 1)
    problems.push_back(
        "config: kernels.fused_cross_entropy = true cannot apply at parallel.tp = " +
        std::to_string(c.parallel.tp) +
        " (the kernels take whole vocabulary rows; tensor parallelism splits them over ranks and takes "
        "the vocabulary-parallel loss); set it to auto or false, or parallel.tp to 1");
  if (k.fused_clip == KernelChoice::kOn && k.fused_adamw == KernelChoice::kOff)
    problems.push_back(
        "config: kernels.fused_clip = true cannot apply with kernels.fused_adamw = false (clipping's "
        "scale is applied inside the fused AdamW kernel); set kernels.fused_adamw: true, or "
        "kernels.fused_clip to auto or false");
}

}  // namespace atl::runtime::config_detail
