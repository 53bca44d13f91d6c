// The model section: its rows of the field table and the rules on its shape.
#include "runtime/config/config_fields.h"

namespace atl::runtime::config_detail {

std::vector<Field> model_fields() {
  const SectionFields<ModelConfig> model{"model", &Config::model};
  return {
      model("vocab", &ModelConfig::vocab, "Vocabulary size: 256 for bytes, or the tokenizer's piece count.",
            at_least(2)),
      model("dim", &ModelConfig::dim,
            "Width of the residual stream; model.heads must divide it into even head sizes.", at_least(1)),
      model("layers", &ModelConfig::layers, "Decoder layers; split over the pipeline's stages.", at_least(1)),
      model("heads", &ModelConfig::heads, "Query heads; divisible by model.kv_heads and by parallel.tp.",
            at_least(1)),
      model("kv_heads", &ModelConfig::kv_heads,
            "Key/value heads (grouped-query attention below model.heads); divisible by parallel.tp.",
            at_least(1)),
      model("ffn", &ModelConfig::ffn, "Hidden width of each SwiGLU MLP; divisible by parallel.tp.",
            at_least(1)),
      model("seq", &ModelConfig::seq,
            "Tokens per sequence (the context); divisible by parallel.tp with sequence parallelism, by "
            "2*parallel.cp "
            "with context parallelism.",
            at_least(1)),
      model("tie_embeddings", &ModelConfig::tie_embeddings,
            "One matrix for the token embedding and the output head."),
      model("document_mask", &ModelConfig::document_mask,
            "Attention only within each document of a packed sequence (boundaries from the data: "
            "Megatron's index, or the tokenizer's BOS/EOS); RoPE positions stay the sequence's."),
      model("rope_theta", &ModelConfig::rope_theta, "Base of the rotary position embedding's frequencies.",
            above(0)),
      model("norm_eps", &ModelConfig::norm_eps, "Epsilon of every RMSNorm.", above(0)),
      model("init_std", &ModelConfig::init_std, "Standard deviation of the weights' normal initialisation.",
            above(0)),
      model("init_from", &ModelConfig::init_from,
            "Weights to start from: a safetensors file (atoll ckpt export) or a Hugging Face Llama "
            "directory; none: random."),
  };
}

void validate_model(const Config& c, Problems& problems) {
  const ModelConfig& m = c.model;
  require_divisible(problems, "model.dim", m.dim, "model.heads", m.heads,
                    "each head gets dim/heads channels, so pick heads that divide dim");
  if (m.heads > 0 && m.dim % m.heads == 0 && (m.dim / m.heads) % 2 != 0)
    problems.push_back("config: model.dim / model.heads = " + std::to_string(m.dim / m.heads) +
                       " is odd; RoPE rotates channel pairs, so change dim or heads for an even head size");
  require_divisible(problems, "model.heads", m.heads, "model.kv_heads", m.kv_heads,
                    "kv_heads must divide heads (each kv head serves heads/kv_heads query heads)");
}

}  // namespace atl::runtime::config_detail
