#include "runtime/model/sdpa_backend.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <vector>

namespace atl::runtime {

std::string sdpa_backend_name(at::SDPBackend backend) {
  switch (backend) {
    case at::SDPBackend::math:
      return "math";
    case at::SDPBackend::flash_attention:
      return "flash_attention";
    case at::SDPBackend::efficient_attention:
      return "efficient_attention";
    case at::SDPBackend::cudnn_attention:
      return "cudnn_attention";
    case at::SDPBackend::overrideable:
      return "overrideable";
    case at::SDPBackend::error:
      break;
  }
  return "none";
}

at::SDPBackend sdpa_choice(const c10::Device& device, at::ScalarType dtype, int64_t heads, int64_t kv_heads,
                           int64_t seq, int64_t head_dim, bool document_mask) {
  const auto options = at::TensorOptions().device(device).dtype(dtype).requires_grad(true);
  const at::Tensor q = at::zeros({1, heads, seq, head_dim}, options);
  if (document_mask) {
    const at::Tensor mask = at::ones({1, 1, seq, seq}, at::TensorOptions().device(device).dtype(at::kBool));
    return static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, q, q, mask, /*dropout_p=*/0.0,
                                                             /*is_causal=*/false));
  }
  const at::Tensor kv = at::zeros({1, kv_heads, seq, head_dim}, options);
  return static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, kv, kv, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                                           /*is_causal=*/true, /*scale=*/std::nullopt,
                                                           /*enable_gqa=*/kv_heads != heads));
}

void prefer_sdpa_backend(at::SDPBackend backend, const c10::Device& device) {
  // A first choice settles LibTorch's default order (recent versions pick it lazily, then).
  sdpa_choice(device, device.is_cuda() ? at::kBFloat16 : at::kFloat, 1, 1, 128, 64);
  at::Context& context = at::globalContext();
  const auto current = context.sDPPriorityOrder();
  std::vector<int64_t> order{static_cast<int64_t>(backend)};
  for (const at::SDPBackend other : current)
    if (other != backend) order.push_back(static_cast<int64_t>(other));
  context.setSDPPriorityOrder(order);
}

std::optional<at::SDPBackend> preferred_sdpa_backend(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kFlash:
      return at::SDPBackend::flash_attention;
    case AttentionKernel::kCudnn:
      return at::SDPBackend::cudnn_attention;
    case AttentionKernel::kEfficient:
      return at::SDPBackend::efficient_attention;
    case AttentionKernel::kAuto:
      break;
  }
  return std::nullopt;
}

std::string attention_line(const Config& config, const c10::Device& device, at::ScalarType dtype) {
  const ModelConfig& m = config.model;
  const int64_t heads = m.heads / config.parallel.tp, head_dim = m.dim / m.heads;
  // document_masked_attention repeats the kv heads for SDPA.
  const bool grouped =
      m.kv_heads != m.heads && kernel_on(config.kernels.native_gqa, true) && !m.document_mask;
  const int64_t kv_heads = grouped ? m.kv_heads / config.parallel.tp : heads;
  const at::SDPBackend backend =
      sdpa_choice(device, dtype, heads, kv_heads, m.seq, head_dim, m.document_mask);
  return "attention: SDPA runs " + sdpa_backend_name(backend) +
         (m.document_mask ? " with document masks" : "") +
         " (kernels.attention=" + std::string(name_of(config.kernels.attention)) + "; " +
         std::to_string(heads) + " heads over " + std::to_string(kv_heads) + " kv heads per rank, head_dim " +
         std::to_string(head_dim) + ", seq " + std::to_string(m.seq) + ", " +
         std::string(c10::toString(dtype)) + ")";
}

}  // namespace atl::runtime
