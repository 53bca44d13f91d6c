#include "launcher/activation_estimate.h"

#include "runtime/model/attention.h"

namespace atl::launcher {
namespace {

using runtime::Config;
using runtime::Recompute;

bool on_gpu(const Config& c) {
  return c.run.device == runtime::DeviceKind::kCuda;
}

// Ring attention (cp > 1) runs the fused kernel block by block and keeps what it keeps: q, this
// rank's K/V (kv heads only), the output and the log-sum-exp.
bool ring_attention(const Config& c) {
  return c.parallel.cp > 1;
}

bool fused_attention(const Config& c) {
  const at::ScalarType dtype =
      runtime::storage_precision(c.train.precision) == runtime::Precision::kBf16 ? at::kBFloat16 : at::kFloat;
  // Document-masked attention always runs SDPA (runtime/model/attention.h).
  return ring_attention(c) || c.model.document_mask ||
         runtime::causal_attention_is_fused(on_gpu(c), dtype, c.model.seq);
}

// The tokens of `microbatch` sequences one rank holds: its 2 of 2*cp chunks of each.
double local_tokens(const Config& c, int64_t microbatch) {
  return static_cast<double>(microbatch) * c.model.seq / c.parallel.cp;
}

// Bytes per token of one layer's saved tensors, by what each is (names as in llama.cpp).
struct PerToken {
  double compute;        // bytes of a value in the compute dtype
  double local;          // hidden values a rank holds outside the tensor-parallel region (d, or d/tp with SP)
  double full;           // hidden values entering a column-parallel layer (d: the whole sequence)
  double heads;          // this rank's query-head values (d/tp)
  double kv;             // this rank's key (or value) values as the attention kernel keeps them
  double kv_projected;   // this rank's key values as k_proj produces them
  double ffn;            // this rank's MLP width (ffn/tp)
  double probabilities;  // a hand-written kernel's softmax: heads/tp x seq per token
  double statistics;     // the fused kernel's log-sum-exp: heads/tp fp32 per token
};

PerToken per_token(const Config& c) {
  const double tp = c.parallel.tp, d = c.model.dim, head_dim = d / c.model.heads;
  const bool sp = c.parallel.sequence_parallel && c.parallel.tp > 1;
  // Ring attention keeps this rank's K/V in kv heads; document_masked_attention repeats the kv
  // heads for SDPA, which keeps the repeated ones.
  const bool grouped_inside =
      c.model.kv_heads != c.model.heads &&
      (ring_attention(c) || (on_gpu(c) && kernel_on(c.kernels.native_gqa, true) && !c.model.document_mask));
  PerToken t;
  t.compute = runtime::element_bytes(c.train.precision);
  t.local = sp ? d / tp : d;
  t.full = d;
  t.heads = d / tp;
  t.kv_projected = c.model.kv_heads * head_dim / tp;
  t.kv = grouped_inside ? t.kv_projected : t.heads;  // repeated to every query head, or not
  t.ffn = c.model.ffn / tp;
  t.probabilities = c.model.heads / tp * static_cast<double>(c.model.seq);
  t.statistics = 4.0 * c.model.heads / tp;
  return t;
}

// RMSNorm: its fp32 input (the statistics are fp32), the normalised values before the weight, and
// its output as the column-parallel layers keep it (gathered to the whole sequence with SP).
// at::rms_norm (fused) keeps its input and O(1) statistics instead of the first two.
double norm_bytes(const Config& c, const PerToken& t) {
  const bool fused = on_gpu(c) && kernel_on(c.kernels.fused_rms_norm, true);
  return (fused ? t.compute * t.local : (4.0 + t.compute) * t.local) + t.compute * t.full;
}

// The attention kernel: fused, q, k, v, its output and the log-sum-exp; hand-written, its scaled
// q, contiguous k and v, the [seq, seq] probabilities, its output and o_proj's copy of it.
double attention_bytes(const Config& c, const PerToken& t) {
  if (fused_attention(c)) return t.compute * (2.0 * t.heads + 2.0 * t.kv) + t.statistics;
  return t.compute * (5.0 * t.heads + t.probabilities);
}

double none_bytes(const Config& c, const PerToken& t) {
  // Two norms, the kernel, and the SwiGLU's gate, silu(gate), up and their product; the fused
  // kernel (fused_ops.h) keeps no silu(gate).
  const bool fused_swiglu = on_gpu(c) && kernel_on(c.kernels.fused_swiglu, true);
  return 2.0 * norm_bytes(c, t) + attention_bytes(c, t) + t.compute * (fused_swiglu ? 3.0 : 4.0) * t.ffn;
}

// Selective: the layer input, the products the rerun reads -- o_proj's (before the tensor-parallel
// exit: the whole sequence), gate and up; q, k, v where the hand-written kernel reruns from them --
// and the fused kernel's own saved tensors.
double selective_bytes(const Config& c, const PerToken& t) {
  const double always = t.compute * (t.local + t.full + 2.0 * t.ffn);
  if (fused_attention(c)) return always + attention_bytes(c, t);
  return always + t.compute * (t.heads + 2.0 * t.kv_projected);
}

}  // namespace

LayerActivations layer_activations(const Config& c, int64_t microbatch) {
  const PerToken t = per_token(c);
  const double tokens = local_tokens(c, microbatch);
  const double none = tokens * none_bytes(c, t);
  const double gradients = tokens * t.compute * (t.local + 2.0 * t.ffn);
  switch (c.train.recompute) {
    case Recompute::kNone:
      return {none, 0.0, gradients};
    case Recompute::kSelective: {
      const double kept = tokens * selective_bytes(c, t);
      return {kept, none - kept, gradients};
    }
    case Recompute::kFull:
      break;
  }
  const double kept = tokens * t.compute * t.local;  // the layer input
  return {kept, none - kept, gradients};
}

double head_activation_bytes(const Config& c, int64_t microbatch, int64_t vocab_rows) {
  const double tokens = local_tokens(c, microbatch);
  const PerToken t = per_token(c);
  // The fused loss (fused_ops.h) keeps the logits in the compute dtype and a float per token, and
  // writes their gradient in that dtype; the ATen chain, fp32 log-softmax and fp32 gradient.
  const bool fused_loss = on_gpu(c) && c.parallel.tp == 1 && kernel_on(c.kernels.fused_cross_entropy, true);
  const double loss_bytes = fused_loss ? 2.0 * t.compute * static_cast<double>(vocab_rows) + 4.0
                                       : 2.0 * 4.0 * static_cast<double>(vocab_rows);
  return tokens * (norm_bytes(c, t) + loss_bytes);
}

double recompute_flops_per_token(const Config& c) {
  const double d = c.model.dim, head_dim = d / c.model.heads, layers = c.model.layers;
  const double attention_products = 4.0 * c.model.seq * d;  // q k^T and the probabilities times v
  switch (c.train.recompute) {
    case Recompute::kNone:
      return 0.0;
    case Recompute::kSelective:
      return fused_attention(c) ? 0.0 : layers * attention_products;
    case Recompute::kFull:
      break;
  }
  const double linear = d * head_dim * (2.0 * c.model.heads + 2.0 * c.model.kv_heads) + 3.0 * d * c.model.ffn;
  return layers * (2.0 * linear + attention_products);
}

}  // namespace atl::launcher
