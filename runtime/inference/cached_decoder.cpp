#include "runtime/inference/cached_decoder.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <tuple>

#include "runtime/model/llama.h"

namespace atl::runtime {

CachedDecoder::CachedDecoder(const TrainedModel& trained, DocumentMarkers markers)
    : config_(trained.config), head_dim_(config_.dim / config_.heads), markers_(markers) {
  const auto& w = trained.weights;
  embed_ = w.at("model.embed_tokens.weight");
  final_norm_ = w.at("model.norm.weight");
  lm_head_ = config_.tie_embeddings ? embed_ : w.at("lm_head.weight");
  const auto cache = [&] { return at::zeros({1, config_.kv_heads, config_.seq, head_dim_}); };
  for (int i = 0; i < config_.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    layers_.push_back(Layer{w.at(p + "input_layernorm.weight"), w.at(p + "self_attn.q_proj.weight"),
                            w.at(p + "self_attn.k_proj.weight"), w.at(p + "self_attn.v_proj.weight"),
                            w.at(p + "self_attn.o_proj.weight"), w.at(p + "post_attention_layernorm.weight"),
                            w.at(p + "mlp.gate_proj.weight"), w.at(p + "mlp.up_proj.weight"),
                            w.at(p + "mlp.down_proj.weight"), cache(), cache()});
  }
  std::tie(rope_cos_, rope_sin_) = rope_tables(config_, at::kFloat, c10::kCPU);
}

at::Tensor CachedDecoder::feed(const std::vector<int64_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), start = position_, end = position_ + n;
  if (n == 0) throw std::invalid_argument("feed: no tokens");
  if (end > config_.seq)
    throw std::invalid_argument("the sequence would reach " + std::to_string(end) +
                                " tokens, past model.seq = " + std::to_string(config_.seq) +
                                "; shorten the prompt or --max-tokens");
  at::NoGradGuard no_grad;
  const at::Tensor ids = at::tensor(tokens, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  at::Tensor h = at::embedding(embed_, ids);  // [1, n, dim]
  const at::Tensor cos = rope_cos_.narrow(0, start, n), sin = rope_sin_.narrow(0, start, n);
  // New query i (position start + i) sees cached positions up to start + i (of its own document).
  at::Tensor visible = at::arange(end).unsqueeze(0) <= (at::arange(n) + start).unsqueeze(1);  // [n, end] bool
  if (config_.document_mask) {
    for (const int64_t token : tokens) {
      const bool starts = !documents_.empty() && markers_.starts_document(last_token_, token);
      documents_.push_back(documents_.empty() ? 0 : documents_.back() + (starts ? 1 : 0));
      last_token_ = token;
    }
    const at::Tensor documents = at::tensor(documents_, at::TensorOptions().dtype(at::kLong));
    visible = visible.logical_and(documents.narrow(0, start, n).unsqueeze(1).eq(documents.unsqueeze(0)));
  }
  for (Layer& layer : layers_) {
    const at::Tensor x = rms_normalize(h, layer.input_norm, config_.norm_eps);
    const at::Tensor q =
        apply_rope(at::linear(x, layer.wq).view({1, n, config_.heads, head_dim_}).transpose(1, 2), cos, sin);
    const at::Tensor k = apply_rope(
        at::linear(x, layer.wk).view({1, n, config_.kv_heads, head_dim_}).transpose(1, 2), cos, sin);
    const at::Tensor v = at::linear(x, layer.wv).view({1, n, config_.kv_heads, head_dim_}).transpose(1, 2);
    layer.keys.narrow(2, start, n).copy_(k);
    layer.values.narrow(2, start, n).copy_(v);
    at::Tensor keys = layer.keys.narrow(2, 0, end), values = layer.values.narrow(2, 0, end);
    if (config_.kv_heads != config_.heads) {  // grouped-query attention, as in training
      keys = keys.repeat_interleave(config_.heads / config_.kv_heads, 1);
      values = values.repeat_interleave(config_.heads / config_.kv_heads, 1);
    }
    const at::Tensor attended = at::scaled_dot_product_attention(q, keys, values, visible)
                                    .transpose(1, 2)
                                    .reshape({1, n, config_.heads * head_dim_});
    h = h + at::linear(attended, layer.wo);
    const at::Tensor y = rms_normalize(h, layer.post_norm, config_.norm_eps);
    h = h + at::linear(at::silu(at::linear(y, layer.w_gate)) * at::linear(y, layer.w_up), layer.w_down);
  }
  position_ = end;
  return at::linear(rms_normalize(h.select(1, n - 1), final_norm_, config_.norm_eps), lm_head_).squeeze(0);
}

}  // namespace atl::runtime
