#include "runtime/model/llama.h"

#include "checkpoint/safetensors.h"
#include "parallel/context_parallel_attention.h"
#include "parallel/document_mask.h"
#include "parallel/ring_masks.h"
#include "parallel/tensor_parallel.h"
#include "runtime/model/attention.h"
#include "runtime/model/fused_ops.h"
#include "runtime/model/hugging_face.h"
#include "text/one_line.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace atl::runtime {
namespace {

std::string layer_prefix(int i) {
  return "model.layers." + std::to_string(i) + ".";
}

// FNV-1a of the name mixed into the run seed with splitmix64: a stable, well-spread seed per
// parameter that does not depend on how parameters are laid out or sharded.
uint64_t parameter_seed(int64_t run_seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = h + static_cast<uint64_t>(run_seed) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The halves of the last dimension swapped: [x1 | x2] -> [x2 | x1]. Times rope_tables' signed sine,
// Hugging Face's rotate_half(x) * sin = [-x2 | x1] * sin, bit for bit (a negation is exact), in one
// kernel fewer.
at::Tensor swap_halves(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

int64_t padded_vocab(int64_t vocab, int tp) {
  const int64_t multiple = 128 * static_cast<int64_t>(tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

namespace {

// One parameter: its canonical (unsharded, unpadded) shape and how tensor parallelism splits it.
struct ParamSpec {
  int layer;  // decoder layer; -1 for the embedding, layers for the final norm and head
  std::string name;
  std::vector<int64_t> canonical_shape;
  int split_dim;  // -1: replicated on every tp rank; 0: rows (column-parallel); 1: columns (row-parallel)
  bool is_norm = false;
  bool is_vocab = false;  // rows are the vocabulary: padded to padded_vocab(vocab, tp) before splitting
};

std::vector<ParamSpec> param_specs(const ModelConfig& c) {
  const int64_t head_dim = c.dim / c.heads;
  std::vector<ParamSpec> specs;
  specs.push_back({-1, "model.embed_tokens.weight", {c.vocab, c.dim}, 0, false, true});
  for (int i = 0; i < c.layers; ++i) {
    const std::string p = layer_prefix(i);
    specs.push_back({i, p + "input_layernorm.weight", {c.dim}, -1, true});
    specs.push_back({i, p + "self_attn.q_proj.weight", {c.heads * head_dim, c.dim}, 0});
    specs.push_back({i, p + "self_attn.k_proj.weight", {c.kv_heads * head_dim, c.dim}, 0});
    specs.push_back({i, p + "self_attn.v_proj.weight", {c.kv_heads * head_dim, c.dim}, 0});
    specs.push_back({i, p + "self_attn.o_proj.weight", {c.dim, c.heads * head_dim}, 1});
    specs.push_back({i, p + "post_attention_layernorm.weight", {c.dim}, -1, true});
    specs.push_back({i, p + "mlp.gate_proj.weight", {c.ffn, c.dim}, 0});
    specs.push_back({i, p + "mlp.up_proj.weight", {c.ffn, c.dim}, 0});
    specs.push_back({i, p + "mlp.down_proj.weight", {c.dim, c.ffn}, 1});
  }
  specs.push_back({c.layers, "model.norm.weight", {c.dim}, -1, true});
  if (!c.tie_embeddings) specs.push_back({c.layers, "lm_head.weight", {c.vocab, c.dim}, 0, false, true});
  return specs;
}

const ParamSpec& spec_named(const std::vector<ParamSpec>& specs, const std::string& name) {
  for (const ParamSpec& s : specs)
    if (s.name == name) return s;
  throw std::out_of_range("no Llama parameter named " + name);
}

std::vector<int64_t> local_shape(const ParamSpec& spec, int64_t vocab, int tp) {
  std::vector<int64_t> shape = spec.canonical_shape;
  if (spec.is_vocab) shape[0] = padded_vocab(vocab, tp);
  if (spec.split_dim >= 0) shape[spec.split_dim] /= tp;
  return shape;
}

int end_layer(const ModelConfig& c, const ModelPart& part) {
  return part.end_layer < 0 ? c.layers : part.end_layer;
}

// Whether `part` needs the parameter; the head of a tied model needs the embedding matrix.
bool part_holds(const ModelConfig& c, const ModelPart& part, const ParamSpec& spec) {
  if (spec.layer < 0) return part.embedding || (part.head && c.tie_embeddings);
  if (spec.layer >= c.layers) return part.head;
  return spec.layer >= part.first_layer && spec.layer < end_layer(c, part);
}

}  // namespace

std::vector<parallel::ParamInfo> LlamaModel::param_infos(const ModelConfig& c, int tp,
                                                         const ModelPart& part) {
  std::vector<parallel::ParamInfo> infos;
  for (const ParamSpec& spec : param_specs(c)) {
    if (!part_holds(c, part, spec)) continue;
    const bool duplicate = spec.layer < 0 && !part.embedding;
    // A tied embedding split between the first and last stage: both copies get a bucket of the same
    // geometry, so their reduced gradients can be summed piece by piece.
    const bool own_bucket = spec.layer < 0 && c.tie_embeddings && part.embedding != part.head;
    infos.push_back({spec.name, local_shape(spec, c.vocab, tp), !spec.is_norm, spec.split_dim < 0, duplicate,
                     spec.layer, own_bucket});
  }
  return infos;
}

LlamaModel::Piece LlamaModel::piece_of(const ModelConfig& c, int tp_size, int tp_rank,
                                       const std::string& name) {
  const std::vector<ParamSpec> specs = param_specs(c);
  const ParamSpec& spec = spec_named(specs, name);
  Piece piece{spec.canonical_shape, std::vector<int64_t>(spec.canonical_shape.size(), 0),
              local_shape(spec, c.vocab, tp_size)};
  if (spec.split_dim >= 0) piece.offsets[spec.split_dim] = piece.sizes[spec.split_dim] * tp_rank;
  return piece;
}

at::Tensor LlamaModel::shard_of(const ModelConfig& c, int tp_size, int tp_rank, const std::string& name,
                                const at::Tensor& canonical) {
  const std::vector<ParamSpec> specs = param_specs(c);
  const ParamSpec& spec = spec_named(specs, name);
  at::Tensor full = canonical;
  if (spec.is_vocab) {
    full = at::zeros({padded_vocab(c.vocab, tp_size), c.dim}, canonical.options());
    full.narrow(0, 0, c.vocab).copy_(canonical.narrow(0, 0, c.vocab));
  }
  if (spec.split_dim < 0) return full;
  const int64_t piece = full.size(spec.split_dim) / tp_size;
  return full.narrow(spec.split_dim, piece * tp_rank, piece);
}

LlamaModel::LlamaModel(const ModelConfig& config, const parallel::FlatParameters& params,
                       comm::Communicator& tp, bool sequence_parallel, const ModelPart& part,
                       parallel::ParameterGate* gate, const ModelKernels& kernels, Recompute recompute,
                       parallel::WeightGradientSink* weight_gradients, Fp8Linears* fp8,
                       comm::Communicator* cp)
    : config_(config),
      part_{part.first_layer, end_layer(config, part), part.embedding, part.head},
      head_dim_(config.dim / config.heads),
      tp_(tp),
      sequence_parallel_(sequence_parallel && tp.size() > 1),
      gate_(gate),
      kernels_(kernels),
      recompute_(recompute),
      weight_gradients_(weight_gradients),
      fp8_(fp8),
      cp_(cp && cp->size() > 1 ? cp : nullptr),
      vocab_start_(parallel::vocab_shard(padded_vocab(config.vocab, tp.size()), tp.size(), tp.rank()).start) {
  if (fp8_ && weight_gradients_)
    throw std::invalid_argument(
        "LlamaModel: FP8 linear layers hand their weight gradients to autograd, not to a weight-gradient "
        "sink");
  if (part_.embedding || (part_.head && config.tie_embeddings))
    embed_ = params.value("model.embed_tokens.weight");
  for (int i = part_.first_layer; i < part_.end_layer; ++i) {
    const std::string p = layer_prefix(i);
    layers_.push_back(
        Layer{{params.value(p + "input_layernorm.weight"), params.value(p + "self_attn.q_proj.weight"),
               params.value(p + "self_attn.k_proj.weight"), params.value(p + "self_attn.v_proj.weight")},
              {params.value(p + "self_attn.o_proj.weight"),
               params.value(p + "post_attention_layernorm.weight"), params.value(p + "mlp.gate_proj.weight"),
               params.value(p + "mlp.up_proj.weight"), params.value(p + "mlp.down_proj.weight")}});
  }
  if (part_.head) {
    final_norm_ = params.value("model.norm.weight");
    lm_head_ = config.tie_embeddings ? embed_ : params.value("lm_head.weight");
  }
  if (part_.embedding) units_.push_back(kEmbeddingUnit);
  for (int i = part_.first_layer; i < part_.end_layer; ++i) units_.push_back(i);
  if (part_.head) units_.push_back(config.layers);

  at::NoGradGuard no_grad;
  const at::ScalarType dtype = params.entries().front().value.scalar_type();
  const c10::Device device = params.device();
  std::tie(rope_cos_, rope_sin_) = rope_tables(config, dtype, device);
  if (cp_) {
    // This rank's positions: those of its two chunks of the sequence.
    rope_cos_ = parallel::take_context_chunks(rope_cos_, 0, cp_->size(), cp_->rank(), /*load_balanced=*/true);
    rope_sin_ = parallel::take_context_chunks(rope_sin_, 0, cp_->size(), cp_->rank(), /*load_balanced=*/true);
  }
  causal_mask_ = causal_mask(config.seq, dtype).to(device);
}

at::Tensor LlamaModel::linear(LinearTape* tape, const at::Tensor& x, const at::Tensor& weight,
                              Product use) const {
  return linear_through(tape, x, weight, use, weight_gradients_, fp8_);
}

at::Tensor LlamaModel::rms_norm(const at::Tensor& x, const at::Tensor& weight_in) const {
  // With sequence parallelism each rank normalises only its positions, so the (replicated) weight's
  // gradient is partial: entering it through copy_to_tp_region all-reduces it over tp in backward.
  const at::Tensor weight = sequence_parallel_ ? parallel::copy_to_tp_region(weight_in, tp_) : weight_in;
  if (kernels_.fused_rms_norm) return at::rms_norm(x, {x.size(-1)}, weight, config_.norm_eps);
  return rms_normalize(x, weight, config_.norm_eps);
}

std::vector<at::Tensor> LlamaModel::attention_inputs(const AttentionInWeights& w, const at::Tensor& h,
                                                     LinearTape* tape, Product qkv) const {
  // Column-parallel q/k/v: this rank's heads only, over the whole sequence.
  const at::Tensor x_tp = parallel::enter_tp_region(rms_norm(h, w.norm), tp_, sequence_parallel_);
  const int64_t batch = x_tp.size(0), seq = x_tp.size(1);
  const int64_t heads = w.wq.size(0) / head_dim_, kv_heads = w.wk.size(0) / head_dim_;
  // [batch, heads, seq, head_dim]
  at::Tensor q = linear(tape, x_tp, w.wq, qkv).view({batch, seq, heads, head_dim_}).transpose(1, 2);
  at::Tensor k = linear(tape, x_tp, w.wk, qkv).view({batch, seq, kv_heads, head_dim_}).transpose(1, 2);
  at::Tensor v = linear(tape, x_tp, w.wv, qkv).view({batch, seq, kv_heads, head_dim_}).transpose(1, 2);
  const at::Tensor cos = rope_cos_.narrow(0, 0, seq), sin = rope_sin_.narrow(0, 0, seq);
  const auto rope = [&](const at::Tensor& x) {
    return kernels_.fused_rope && fused_rope_takes(x, cos, sin) ? fused_rope(x, cos, sin)
                                                                : apply_rope(x, cos, sin);
  };
  q = rope(q);
  k = rope(k);
  // Grouped-query attention: each kv head serves heads/kv_heads query heads, shared inside SDPA or
  // ring attention (which passes only the kv heads around) or repeated for it.
  const bool grouped = kv_heads != heads && ((kernels_.native_gqa && q.is_cuda()) || cp_);
  if (kv_heads != heads && !grouped) {
    k = k.repeat_interleave(heads / kv_heads, 1);
    v = v.repeat_interleave(heads / kv_heads, 1);
  }
  return {q, k, v};
}

LlamaModel::Documents LlamaModel::documents_of(const at::Tensor& document_ids) const {
  // The masks in the compute dtype, the causal mask's.
  if (cp_)
    return {{},
            c10::make_intrusive<parallel::RingMasks>(cp_->size(), cp_->rank(), /*load_balanced=*/true,
                                                     document_ids, causal_mask_.scalar_type())};
  if (!document_ids.defined()) return {};
  return {parallel::document_causal_mask(document_ids, document_ids, /*causal=*/true), {}};
}

at::Tensor LlamaModel::attention_kernel(const std::vector<at::Tensor>& qkv,
                                        const Documents& documents) const {
  const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const int64_t seq = q.size(2);
  if (cp_) return parallel::ring_attention(q, k, v, *cp_, documents.ring);
  if (documents.mask.defined()) return document_masked_attention(q, k, v, documents.mask);
  if (k.size(1) != q.size(1)) return grouped_causal_attention(q, k, v);
  return causal_attention(q, k, v, causal_mask_.narrow(0, 0, seq).narrow(1, 0, seq));
}

bool LlamaModel::attention_kernel_is_fused(const at::Tensor& like, const Documents& documents) const {
  // Ring attention and SDPA with a document mask, like the fused kernel, keep no [seq, seq]
  // probabilities.
  return cp_ || documents.mask.defined() ||
         causal_attention_is_fused(like.is_cuda(), like.scalar_type(), config_.seq);
}

at::Tensor LlamaModel::layer_output(const AttentionOutWeights& w, const at::Tensor& h,
                                    const at::Tensor& attended, LinearTape* tape) const {
  const int64_t batch = attended.size(0), heads = attended.size(1), seq = attended.size(2);
  const at::Tensor merged = attended.transpose(1, 2).reshape({batch, seq, heads * head_dim_});
  // o_proj: row-parallel.
  const at::Tensor h1 = h + parallel::exit_tp_region(linear(tape, merged, w.wo), tp_, sequence_parallel_);
  // SwiGLU: gate and up column-parallel, down row-parallel.
  const at::Tensor x = parallel::enter_tp_region(rms_norm(h1, w.norm), tp_, sequence_parallel_);
  // Two statements: a tape hands its products back in the order they were taken.
  const at::Tensor gate_in = linear(tape, x, w.w_gate);
  const at::Tensor up = linear(tape, x, w.w_up);
  const at::Tensor product = kernels_.fused_swiglu && fused_swiglu_takes(gate_in, up)
                                 ? fused_swiglu(gate_in, up)
                                 : at::silu(gate_in) * up;
  return h1 + parallel::exit_tp_region(linear(tape, product, w.w_down, Product::kNotReread), tp_,
                                       sequence_parallel_);
}

LlamaModel::AttentionInWeights LlamaModel::attention_in_weights(const std::vector<at::Tensor>& list,
                                                                size_t first) {
  return {list.at(first), list.at(first + 1), list.at(first + 2), list.at(first + 3)};
}

LlamaModel::AttentionOutWeights LlamaModel::attention_out_weights(const std::vector<at::Tensor>& list,
                                                                  size_t first) {
  return {list.at(first), list.at(first + 1), list.at(first + 2), list.at(first + 3), list.at(first + 4)};
}

at::Tensor LlamaModel::decoder_layer(const Layer& layer, const at::Tensor& h,
                                     const Documents& documents) const {
  if (recompute_ == Recompute::kNone || !at::GradMode::is_enabled())
    return layer_output(layer.out, h, attention_kernel(attention_inputs(layer.in, h, nullptr), documents),
                        nullptr);
  // Full, or selective around a kernel that keeps [seq, seq] probabilities: one region, the whole
  // layer, keeping its input (full) or its input and its linear layers' products (selective).
  const bool selective = recompute_ == Recompute::kSelective;
  if (!selective || !attention_kernel_is_fused(h, documents)) {
    std::vector<at::Tensor> weights = layer.in.list();
    for (const at::Tensor& w : layer.out.list()) weights.push_back(w);
    // The region reruns in backward, after later microbatches' forwards: it keeps its own documents.
    const Region whole = [this, documents](const std::vector<at::Tensor>& in,
                                           const std::vector<at::Tensor>& w, LinearTape* tape) {
      const at::Tensor attended =
          attention_kernel(attention_inputs(attention_in_weights(w), in[0], tape), documents);
      return std::vector<at::Tensor>{layer_output(attention_out_weights(w, 4), in[0], attended, tape)};
    };
    return run_recomputed(whole, {h}, weights, selective)[0];
  }
  // Selective around the fused kernel: it keeps only q, k, v, its output and O(seq) statistics, so it
  // runs once, between two regions -- the norm, q/k/v and RoPE before it, the rest after. The layer
  // input reaches the second region through the first (passed on last): its gradient then sums the
  // residual's part and the norm's in the order it does without recomputation, bit for bit.
  const Region before = [this](const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& w,
                               LinearTape* tape) {
    // q, k, v leave for the kernel, which keeps them; RoPE's backward needs no input values.
    std::vector<at::Tensor> out = attention_inputs(attention_in_weights(w), in[0], tape, Product::kNotReread);
    out.push_back(in[0].view_as(in[0]));
    return out;
  };
  const Region after = [this](const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& w,
                              LinearTape* tape) {
    return std::vector<at::Tensor>{layer_output(attention_out_weights(w), in[0], in[1], tape)};
  };
  const std::vector<at::Tensor> qkv_and_input = run_recomputed(before, {h}, layer.in.list(), true);
  const at::Tensor attended = attention_kernel(qkv_and_input, documents);
  return run_recomputed(after, {qkv_and_input[3], attended}, layer.out.list(), true)[0];
}

void LlamaModel::acquire(size_t index) const {
  if (!gate_) return;
  gate_->acquire(units_[index],
                 index + 1 < units_.size() ? units_[index + 1] : parallel::ParameterGate::kNoUnit);
}

at::Tensor LlamaModel::release_after(size_t index, const at::Tensor& output) const {
  if (!gate_) return output;
  return gate_->release_after(units_[index], output,
                              index > 0 ? units_[index - 1] : parallel::ParameterGate::kNoUnit);
}

at::Tensor LlamaModel::forward(const at::Tensor& input, const at::Tensor& document_ids) const {
  size_t unit = 0;  // index into units_, in forward order
  at::Tensor h = input;
  const Documents documents = documents_of(document_ids);
  if (part_.embedding) {
    acquire(unit);
    h = release_after(
        unit++, parallel::vocab_parallel_embedding(input, embed_, vocab_start_, tp_, sequence_parallel_));
  }
  for (const Layer& layer : layers_) {
    acquire(unit);
    h = release_after(unit++, decoder_layer(layer, h, documents));
  }
  if (!part_.head) return h;
  acquire(unit);
  // A tied head reads the embedding matrix, which belongs to the embedding's unit.
  const bool tied = gate_ && config_.tie_embeddings;
  if (tied) gate_->acquire(kEmbeddingUnit, parallel::ParameterGate::kNoUnit);
  // LM head: column-parallel.
  at::Tensor logits =
      at::linear(parallel::enter_tp_region(rms_norm(h, final_norm_), tp_, sequence_parallel_), lm_head_);
  if (tied) logits = gate_->release_after(kEmbeddingUnit, logits, units_[unit]);
  return release_after(unit, logits);
}

std::vector<int64_t> LlamaModel::hidden_shape(int64_t batch) const {
  const int64_t seq = cp_ ? config_.seq / cp_->size() : config_.seq;
  return {batch, sequence_parallel_ ? seq / tp_.size() : seq, config_.dim};
}

at::Tensor LlamaModel::loss_of(const at::Tensor& logits, const at::Tensor& targets) const {
  if (tp_.size() == 1 && kernels_.fused_cross_entropy) {
    // The vocabulary's padding rows sliced off as a view (the kernels take a row stride); none to
    // slice, no slice, whose backward would write a zero tensor and copy the gradient into it.
    const at::Tensor unpadded =
        logits.size(-1) == config_.vocab ? logits : logits.narrow(-1, 0, config_.vocab);
    const at::Tensor real = unpadded.reshape({-1, config_.vocab});
    const at::Tensor flat_targets = targets.reshape({-1});
    if (fused_cross_entropy_takes(real, flat_targets)) return fused_cross_entropy(real, flat_targets);
  }
  const at::Tensor out = logits.to(at::kFloat);  // the softmax in fp32 whatever the compute dtype
  const int64_t rows = out.size(-1);
  if (tp_.size() > 1)
    return parallel::vocab_parallel_cross_entropy(out.reshape({-1, rows}), targets.reshape({-1}),
                                                  vocab_start_, config_.vocab, tp_);
  // One rank: padding rows of the vocabulary never take part in the softmax.
  return at::cross_entropy_loss(out.narrow(-1, 0, config_.vocab).reshape({-1, config_.vocab}),
                                targets.reshape({-1}));
}

at::Tensor LlamaModel::loss(const at::Tensor& tokens, const at::Tensor& targets) const {
  return loss_of(forward(tokens), targets);
}

at::Tensor rms_normalize(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // Statistics in fp32 whatever the compute dtype (Hugging Face's LlamaRMSNorm); a no-op in fp32.
  const at::Tensor x32 = x.to(at::kFloat);
  return (x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps)).to(x.scalar_type()) * weight;
}

std::pair<at::Tensor, at::Tensor> rope_tables(const ModelConfig& config, at::ScalarType dtype,
                                              c10::Device device) {
  // Hugging Face's convention: inv_freq_j = theta^(-2j/d), angles duplicated over both halves of the
  // head dimension. Computed on the CPU in double, then moved: the same tables on every device, in
  // the compute dtype, as Hugging Face casts cos/sin to the activations'.
  const int64_t head_dim = config.dim / config.heads;
  const auto doubles = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor inv_freq = at::pow(config.rope_theta, -at::arange(0, head_dim, 2, doubles) / head_dim);
  at::Tensor angles = at::outer(at::arange(config.seq, doubles), inv_freq);
  const at::Tensor sin = angles.sin();
  angles = at::cat({angles, angles}, -1);
  return {angles.cos().to(device, dtype), at::cat({-sin, sin}, -1).to(device, dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin) {
  return x * cos + swap_halves(x) * signed_sin;
}

int layer_of(const std::string& name, int layers) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) == 0) return std::stoi(name.substr(prefix.size()));
  return name.rfind("model.embed_tokens", 0) == 0 ? 0 : layers - 1;
}

double training_flops_per_token(const ModelConfig& c) {
  const double head_dim = static_cast<double>(c.dim) / c.heads;
  const double attn = c.dim * head_dim * (2.0 * c.heads + 2.0 * c.kv_heads);
  const double mlp = 3.0 * c.dim * c.ffn;
  const double per_layer = attn + mlp + 2.0 * c.dim;
  const double non_embedding = c.layers * per_layer + c.dim + static_cast<double>(c.vocab) * c.dim;
  return 6.0 * non_embedding + 12.0 * c.layers * c.seq * c.dim;
}

void initialize_parameters(const ModelConfig& config, int64_t seed, const parallel::FlatParameters& params,
                           int tp_size, int tp_rank) {
  at::NoGradGuard no_grad;
  const double scaled_std = config.init_std / std::sqrt(2.0 * config.layers);
  for (const ParamSpec& spec : param_specs(config)) {
    if (!params.contains(spec.name)) continue;  // held by another pipeline stage
    const at::Tensor& local = params.value(spec.name);
    if (spec.is_norm) {
      local.fill_(1.0);
      continue;
    }
    const bool output_projection =
        spec.name.find("o_proj") != std::string::npos || spec.name.find("down_proj") != std::string::npos;
    // The canonical tensor, drawn whole: padding rows are not drawn (padding depends on tp and must
    // never shift the stream), then this rank keeps its slice.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, spec.name));
    const at::Tensor canonical =
        at::normal(0.0, output_projection ? scaled_std : config.init_std, spec.canonical_shape, gen);
    local.copy_(LlamaModel::shard_of(config, tp_size, tp_rank, spec.name, canonical));
  }
}

namespace {

// model.init_from naming a Hugging Face directory: its config.json must describe this config's model
// (all but seq, which RoPE does not depend on); invalid_argument naming the first field that differs.
void check_same_model(const ModelConfig& ours, const std::string& dir) {
  const ModelConfig theirs = read_hugging_face_config(dir);
  const auto differs = [&dir](const char* hf_key, const char* our_key, auto hf_value, auto our_value) {
    if (hf_value == our_value) return;
    std::ostringstream line;
    line << std::boolalpha << "model.init_from: " << dir << "/config.json has " << hf_key << " " << hf_value
         << " but model." << our_key << " is " << our_value << "; set model." << our_key << ": " << hf_value;
    throw std::invalid_argument(line.str());
  };
  differs("vocab_size", "vocab", theirs.vocab, ours.vocab);
  differs("hidden_size", "dim", theirs.dim, ours.dim);
  differs("num_hidden_layers", "layers", theirs.layers, ours.layers);
  differs("num_attention_heads", "heads", theirs.heads, ours.heads);
  differs("num_key_value_heads", "kv_heads", theirs.kv_heads, ours.kv_heads);
  differs("intermediate_size", "ffn", theirs.ffn, ours.ffn);
  differs("tie_word_embeddings", "tie_embeddings", theirs.tie_embeddings, ours.tie_embeddings);
  differs("rope_theta", "rope_theta", theirs.rope_theta, ours.rope_theta);
  differs("rms_norm_eps", "norm_eps", theirs.norm_eps, ours.norm_eps);
}

}  // namespace

std::map<std::string, at::Tensor> read_initial_weights(const ModelConfig& config, const std::string& path) {
  std::map<std::string, at::Tensor> weights;
  const bool directory = is_hugging_face_directory(path);
  try {
    if (directory) {
      check_same_model(config, path);
      weights = read_hugging_face_weights(path);
    } else {
      for (checkpoint::NamedTensor& t : checkpoint::read_safetensors(path))
        weights[t.name] = std::move(t.tensor);
    }
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw std::invalid_argument(what.rfind("model.init_from", 0) == 0 ? what : "model.init_from: " + what);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("model.init_from: ") + e.what());
  }
  check_weights_match(config, weights, "model.init_from: " + path,
                      directory ? "; save the whole model (save_pretrained)"
                                : "; export the weights of this model (atoll ckpt export)");
  return weights;
}

void check_weights_match(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
                         const std::string& source, const std::string& missing_fix) {
  const std::vector<ParamSpec> specs = param_specs(config);
  for (const ParamSpec& spec : specs) {
    auto it = weights.find(spec.name);
    if (it == weights.end()) throw std::invalid_argument(source + " has no " + spec.name + missing_fix);
    if (it->second.sizes().vec() != spec.canonical_shape)
      throw std::invalid_argument(source + ": " + spec.name +
                                  " has another shape than this model's; check the model section");
  }
  for (const auto& [name, tensor] : weights) {
    const bool known =
        std::any_of(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name == name; });
    if (!known)
      throw std::invalid_argument(source + " holds " + text::one_line(name) +
                                  ", which this model does not have; check the model section (e.g. "
                                  "model.tie_embeddings)");
  }
}

void load_initial_weights(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
                          const parallel::FlatParameters& params, int tp_size, int tp_rank) {
  at::NoGradGuard no_grad;
  for (const parallel::FlatEntry& e : params.entries())
    e.value.copy_(
        LlamaModel::shard_of(config, tp_size, tp_rank, e.info.name, weights.at(e.info.name).to(at::kFloat)));
}

}  // namespace atl::runtime
