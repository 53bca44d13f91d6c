// The canonical Llama decoder (DESIGN §4): RMSNorm (eps from the config), RoPE in Hugging Face's
// rotate-half convention, grouped-query causal attention, SwiGLU MLP, no biases, optional tied
// embeddings. Parameter names are Hugging Face's with global layer indices, so a checkpoint
// exports to what transformers.LlamaForCausalLM loads.
//
// The model does not own its parameters: they live in a parallel::FlatParameters (one flat
// buffer, see flat_parameters.h) built from param_infos(); the model reads views of them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/parameter_gate.h"
#include "parallel/ring_masks.h"
#include "parallel/weight_gradient_sink.h"
#include "runtime/config/config.h"
#include "runtime/model/recompute.h"

namespace atl::runtime {

// Vocabulary rows rounded up to a multiple of 128 * tp (Megatron's rule; keeps vocab-parallel
// shards equal). Padding rows are zero and excluded from the loss.
int64_t padded_vocab(int64_t vocab, int tp);

// The part of the model one pipeline chunk runs (DESIGN §5): a range of decoder layers, plus the
// embedding on the first virtual stage and the final norm, LM head and loss on the last.
struct ModelPart {
  int first_layer = 0;
  int end_layer = -1;  // one past the last layer; -1: through the last layer
  bool embedding = true;
  bool head = true;
};

// Kernel choices that compute the same model (rounded differently): the trainer turns them on for GPUs.
struct ModelKernels {
  bool fused_rms_norm = false;  // at::rms_norm: one fused kernel each way where LibTorch has one (CUDA)
  bool native_gqa = false;      // kv heads shared inside SDPA (enable_gqa) rather than repeated; GPU only
  bool fused_swiglu = false;    // fused_ops.h: SwiGLU's product in one kernel each way; GPU only
  bool fused_rope = false;      // fused_ops.h: RoPE in one kernel each way; GPU only
  bool fused_cross_entropy = false;  // fused_ops.h: the loss without fp32 logits (one rank of tp); GPU only
};

class LlamaModel {
 public:
  // `tp`: the tensor-parallel group (size 1 for none). Attention heads, kv heads, the MLP width and
  // the vocabulary rows are split over it (Megatron: q/k/v, gate/up and the LM head
  // column-parallel, o_proj and down_proj row-parallel, the embedding vocabulary-parallel).
  // With `sequence_parallel`, activations outside attention and MLP hold seq/tp positions per rank.
  // `part`: the layers (and ends) this instance runs; their parameters must be in `params`.
  // `gate` (ZeRO): told before and after each unit of parameters is used, in forward order --
  // the embedding (unit kEmbeddingUnit), each decoder layer (its index), the head (unit `layers`),
  // matching ParamInfo::unit. Null: parameters are always present.
  // `recompute`: what each decoder layer keeps for its backward when gradients are recorded
  // (recompute.h; evaluation and inference never record, so never recompute).
  // `weight_gradients`: where the decoder layers' linear weights land their gradients (the
  // data-parallel engine's buffer, kernels.fused_weight_grad; sink_linear.h). Null: autograd's .grad.
  // `fp8`: the decoder layers' linear products (q, k, v, o, gate, up, down) in FP8 (train.precision
  // fp8, fp8_linear.h); the embedding, attention, norms, LM head and loss keep the parameters' dtype.
  // Not with `weight_gradients` (std::invalid_argument).
  // `cp` (context parallelism, null for none): the group holding the other chunks of the same
  // sequences. The model then runs on this rank's two chunks of every sequence (tokens and targets as
  // parallel::take_context_chunks cuts them, load-balanced), with their RoPE positions, and attention
  // by ring (context_parallel_attention.h); hidden states hold seq/cp positions. CPU only.
  LlamaModel(const ModelConfig& config, const parallel::FlatParameters& params, comm::Communicator& tp,
             bool sequence_parallel = false, const ModelPart& part = {},
             parallel::ParameterGate* gate = nullptr, const ModelKernels& kernels = {},
             Recompute recompute = Recompute::kNone, parallel::WeightGradientSink* weight_gradients = nullptr,
             Fp8Linears* fp8 = nullptr, comm::Communicator* cp = nullptr);
  static constexpr int kEmbeddingUnit = -1;

  // This rank's piece of every parameter of `part` at tensor-parallel size `tp`, in forward order.
  // With tied embeddings, a head without the embedding holds its own copy of
  // model.embed_tokens.weight (marked `duplicate`; the embedding group keeps the copies equal).
  static std::vector<parallel::ParamInfo> param_infos(const ModelConfig& config, int tp = 1,
                                                      const ModelPart& part = {});
  // This rank's piece of parameter `name`, cut from its canonical full tensor (vocabulary rows
  // unpadded, or padded for any tp): pads the vocabulary for `tp_size`, then slices.
  // Where this rank's piece of parameter `name` lies in the canonical (unpadded) tensor: the global
  // shape, and the piece as a box of it (offsets, sizes; vocabulary rows of the padded piece may
  // run past the global rows).
  struct Piece {
    std::vector<int64_t> global_shape, offsets, sizes;
  };
  static Piece piece_of(const ModelConfig& config, int tp_size, int tp_rank, const std::string& name);
  static at::Tensor shard_of(const ModelConfig& config, int tp_size, int tp_rank, const std::string& name,
                             const at::Tensor& canonical);

  // The part's forward: tokens (int64 [batch, seq]) with the embedding, else the previous part's
  // hidden states; returns hidden states for the next part, or with the head this rank's logits over its rows
  // of the padded vocabulary: [batch, seq, padded_vocab / tp].
  // `document_ids` (document-masked attention): every position's document in the WHOLE sequences,
  // int64 [batch, seq] (parallel::document_ids), also under context parallelism; each query then
  // sees only the earlier keys of its own document. RoPE positions stay those of the sequence.
  // Undefined: causal attention over the whole sequence.
  at::Tensor forward(const at::Tensor& input, const at::Tensor& document_ids = {}) const;
  // Mean next-token cross-entropy over all positions of the head's logits; targets: int64 [batch, seq].
  at::Tensor loss_of(const at::Tensor& logits, const at::Tensor& targets) const;
  // The hidden-state shape that flows between parts for a microbatch of `batch` sequences:
  // [batch, seq / cp / tp (with sequence parallelism) or seq / cp, dim].
  std::vector<int64_t> hidden_shape(int64_t batch) const;

  // Whole model: mean next-token cross-entropy over all positions. tokens, targets: int64 [batch, seq].
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets) const;

 private:
  // A decoder layer's parameters in forward order: its attention's inputs (norm and q/k/v), then
  // what follows the attention kernel (o_proj, norm, SwiGLU). Lists, so recomputed regions can read
  // them through the aliases they are handed (recompute.h).
  struct AttentionInWeights {
    at::Tensor norm, wq, wk, wv;
    std::vector<at::Tensor> list() const { return {norm, wq, wk, wv}; }
  };
  struct AttentionOutWeights {
    at::Tensor wo, norm, w_gate, w_up, w_down;
    std::vector<at::Tensor> list() const { return {wo, norm, w_gate, w_up, w_down}; }
  };
  struct Layer {
    AttentionInWeights in;
    AttentionOutWeights out;
  };
  // What one forward's attention masks, built once for all its layers (and their backward): with
  // context parallelism `ring`, the blocks every ring step computes and what each sees (cut from the
  // document ids where there are any); without, `mask`, bool [batch, 1, seq, seq] (causal and same
  // document), or undefined for no document mask.
  struct Documents {
    at::Tensor mask;
    c10::intrusive_ptr<parallel::RingMasks> ring;
  };
  Documents documents_of(const at::Tensor& document_ids) const;
  static AttentionInWeights attention_in_weights(const std::vector<at::Tensor>& list, size_t first = 0);
  static AttentionOutWeights attention_out_weights(const std::vector<at::Tensor>& list, size_t first = 0);
  // One decoder layer, with the recomputation of `recompute_` when gradients are recorded.
  at::Tensor decoder_layer(const Layer& layer, const at::Tensor& h, const Documents& documents) const;
  // The layer in three pieces: the attention kernel's q, k, v from the layer input (norm, q/k/v,
  // RoPE, kv heads repeated where the kernel needs it); the kernel; the layer's output from its
  // input and the kernel's (o_proj and the residual, norm, SwiGLU MLP and the residual). `tape`:
  // where the linear layers' products go (recompute.h), null: computed; `qkv`: whether a rerun
  // reads q, k and v (it does where the kernel reruns with them).
  std::vector<at::Tensor> attention_inputs(const AttentionInWeights& w, const at::Tensor& h, LinearTape* tape,
                                           Product qkv = Product::kRereadInBackward) const;
  at::Tensor attention_kernel(const std::vector<at::Tensor>& qkv, const Documents& documents) const;
  at::Tensor layer_output(const AttentionOutWeights& w, const at::Tensor& h, const at::Tensor& attended,
                          LinearTape* tape) const;
  // Whether the kernel is the fused one, which keeps no [seq, seq] probabilities for backward.
  bool attention_kernel_is_fused(const at::Tensor& like, const Documents& documents) const;
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  // A decoder layer's x W^T (recompute.h's linear_through, handing W's gradient to weight_gradients_,
  // or in FP8 with fp8_).
  at::Tensor linear(LinearTape* tape, const at::Tensor& x, const at::Tensor& weight,
                    Product use = Product::kRereadInBackward) const;
  // Gate calls for units_[index], naming its neighbours for prefetching.
  void acquire(size_t index) const;
  at::Tensor release_after(size_t index, const at::Tensor& output) const;

  ModelConfig config_;
  ModelPart part_;
  int64_t head_dim_;
  comm::Communicator& tp_;
  bool sequence_parallel_;
  parallel::ParameterGate* gate_;
  ModelKernels kernels_;
  Recompute recompute_;
  parallel::WeightGradientSink* weight_gradients_;
  Fp8Linears* fp8_;
  comm::Communicator* cp_;  // null: the whole sequence on this rank
  std::vector<int> units_;  // the parameter units this part uses, in forward order
  int64_t vocab_start_;     // first vocabulary row this tp rank holds
  at::Tensor embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  at::Tensor rope_cos_,
      rope_sin_;            // [seq / cp, head_dim] at this rank's positions; the sine signed (rope_tables)
  at::Tensor causal_mask_;  // [seq, seq], 0 on and below the diagonal, -inf above
};

// The pieces of the decoder both the training model and the cached decoder (inference/) use:
// RMSNorm with statistics in fp32, Hugging Face's RoPE tables (cos and a signed sin, [seq, head_dim],
// computed in double, then cast: the sine's first half negated) and their application in the
// rotate-half convention.
at::Tensor rms_normalize(const at::Tensor& x, const at::Tensor& weight, double eps);
std::pair<at::Tensor, at::Tensor> rope_tables(const ModelConfig& config, at::ScalarType dtype,
                                              c10::Device device);
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& signed_sin);

// The layer a canonical parameter name belongs to: N for "model.layers.N.*", 0 for the embedding,
// layers - 1 for the final norm and the head (Streaming DiLoCo's fragments are strided layers).
int layer_of(const std::string& name, int layers);

// Non-embedding FLOPs of one training token (forward + backward), the MFU numerator:
// 6 x (non-embedding parameters, lm_head included) + 12 x layers x seq x dim (attention).
double training_flops_per_token(const ModelConfig& config);

// Fills the parameters with the layout-invariant initialisation of DESIGN §4: each full parameter
// is drawn from Normal(0, std) with a generator seeded from (seed, canonical name), o_proj and
// down_proj with std / sqrt(2 * layers), norms with ones; padding rows stay zero. Each tp rank keeps
// its slice of the same full tensor, so every layout starts from the same weights.
void initialize_parameters(const ModelConfig& config, int64_t seed, const parallel::FlatParameters& params,
                           int tp_size = 1, int tp_rank = 0);

// model.init_from: reads a safetensors file of canonical weights (atoll ckpt export, or Hugging
// Face names and shapes in fp32/bf16/fp16) or a Hugging Face Llama directory (save_pretrained:
// config.json and model.safetensors or sharded with model.safetensors.index.json, whose config must
// describe this model), and checks that it holds exactly the parameters of `config` with their
// canonical shapes; std::invalid_argument, one line naming the file and the first problem.
std::map<std::string, at::Tensor> read_initial_weights(const ModelConfig& config, const std::string& path);
// std::invalid_argument unless `weights` holds exactly the parameters of `config` with their
// canonical shapes: "SOURCE has no NAME" + `missing_fix`, or names the tensor of another shape or
// one the model lacks.
void check_weights_match(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
                         const std::string& source, const std::string& missing_fix);
// Copies each parameter this rank holds from `weights` (its tensor-parallel slice, padded vocabulary).
void load_initial_weights(const ModelConfig& config, const std::map<std::string, at::Tensor>& weights,
                          const parallel::FlatParameters& params, int tp_size, int tp_rank);

}  // namespace atl::runtime
