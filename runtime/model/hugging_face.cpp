#include "runtime/model/hugging_face.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "checkpoint/json_integer.h"
#include "text/one_line.h"

namespace atl::runtime {
namespace fs = std::filesystem;
namespace {

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::invalid_argument(file.string() + " is missing; a Hugging Face model directory has one");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    // Not e.what(): it quotes the bytes last read, line breaks included.
    throw std::invalid_argument(file.string() + " is not JSON (a syntax error at byte " +
                                std::to_string(e.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(file.string() + " is not JSON that Atoll reads (a number past 64 bits)");
  }
}

// config.json's `key` as T; std::invalid_argument naming the file when it is absent or of another type.
template <typename T>
T config_value(const nlohmann::json& config, const std::string& key, const fs::path& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) throw std::invalid_argument(file.string() + " has no " + key);
  const auto wrong_type = [&] {
    return std::invalid_argument(file.string() + "'s " + key + " is " + it->dump() + ", of the wrong type");
  };
  if constexpr (std::is_integral_v<T>) {
    const std::optional<T> value = checkpoint::json_integer<T>(*it);
    if (!value) throw wrong_type();
    return *value;
  } else {
    if (!it->is_number()) throw wrong_type();
    return it->template get<T>();
  }
}

}  // namespace

bool is_hugging_face_directory(const std::string& path) {
  return fs::is_directory(path) && fs::exists(fs::path(path) / "config.json");
}

namespace {

ModelConfig config_from_json(const nlohmann::json& c, const fs::path& file) {
  const std::string type = c.value("model_type", std::string("(none)"));
  if (type != "llama")
    throw std::invalid_argument(file.string() + " describes a model of type '" + text::one_line(type) +
                                "'; Atoll trains Llama (LlamaForCausalLM) models only");
  const auto refuse = [&file](const std::string& what) {
    throw std::invalid_argument(file.string() + ": " + what + ", which Atoll's Llama does not have");
  };
  if (c.value("hidden_act", std::string("silu")) != "silu") refuse("hidden_act is not silu");
  if (c.value("attention_bias", false) || c.value("mlp_bias", false)) refuse("it has biases");
  ModelConfig m;
  m.vocab = config_value<int>(c, "vocab_size", file);
  m.dim = config_value<int>(c, "hidden_size", file);
  m.layers = config_value<int>(c, "num_hidden_layers", file);
  m.heads = config_value<int>(c, "num_attention_heads", file);
  m.kv_heads = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()
                   ? config_value<int>(c, "num_key_value_heads", file)
                   : m.heads;
  m.ffn = config_value<int>(c, "intermediate_size", file);
  m.seq = config_value<int>(c, "max_position_embeddings", file);
  m.norm_eps = config_value<double>(c, "rms_norm_eps", file);
  m.tie_embeddings = c.value("tie_word_embeddings", false);
  if (m.heads <= 0 || m.dim % m.heads != 0) refuse("hidden_size is not a multiple of num_attention_heads");
  if (c.contains("head_dim") && !c["head_dim"].is_null() &&
      config_value<int>(c, "head_dim", file) != m.dim / m.heads)
    refuse("head_dim differs from hidden_size / num_attention_heads");
  // RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta}; 4.x rope_theta and rope_scaling.
  nlohmann::json rope = c.value("rope_parameters", nlohmann::json());
  if (rope.is_null()) rope = c.value("rope_scaling", nlohmann::json());
  if (rope.is_object()) {
    const std::string rope_type = rope.value("rope_type", rope.value("type", std::string("default")));
    if (rope_type != "default") refuse("its RoPE is of type '" + text::one_line(rope_type) + "'");
  }
  m.rope_theta = rope.is_object() && rope.contains("rope_theta")
                     ? config_value<double>(rope, "rope_theta", file)
                 : c.contains("rope_theta") ? config_value<double>(c, "rope_theta", file)
                                            : 10000.0;
  return m;
}

std::vector<fs::path> shards_in_index(const fs::path& index, const std::string& dir) {
  const nlohmann::json map = read_json(index).value("weight_map", nlohmann::json());
  if (!map.is_object() || map.empty())
    throw std::invalid_argument(index.string() + " has no weight_map naming the shard files");
  std::set<std::string> names;
  for (const auto& [tensor, file] : map.items())
    if (file.is_string()) names.insert(file.get<std::string>());
  std::vector<fs::path> files;
  for (const std::string& name : names) {
    if (name.empty() || fs::path(name).has_parent_path() || name == "." || name == "..")
      throw std::invalid_argument(index.string() + " names the shard '" + text::one_line(name) +
                                  "' outside " + dir);
    files.push_back(fs::path(dir) / name);
  }
  return files;
}

// A field of another JSON type than the one read (a number for model_type, a list at the top):
// nlohmann-json's type_error, as one line naming the file.
template <typename Read>
auto typed(const fs::path& file, Read read) {
  try {
    return read();
  } catch (const nlohmann::json::type_error& e) {
    throw std::invalid_argument(file.string() + " has a field of the wrong type (" +
                                text::one_line(e.what()) + ")");
  }
}

}  // namespace

ModelConfig read_hugging_face_config(const std::string& dir) {
  const fs::path file = fs::path(dir) / "config.json";
  return typed(file, [&] { return config_from_json(read_json(file), file); });
}

std::map<std::string, at::Tensor> read_hugging_face_weights(const std::string& dir) {
  std::vector<fs::path> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    files = typed(index, [&] { return shards_in_index(index, dir); });  // never a shard outside dir
  } else {
    files.push_back(fs::path(dir) / "model.safetensors");
  }
  std::map<std::string, at::Tensor> weights;
  for (const fs::path& file : files) {
    if (!fs::exists(file))
      throw std::invalid_argument(file.string() + " is missing; the directory's weights are incomplete");
    for (checkpoint::NamedTensor& t : checkpoint::read_safetensors(file.string()))
      weights[t.name] = std::move(t.tensor);
  }
  return weights;
}

std::string hugging_face_config_json(const ModelConfig& m, int bos_id, int eos_id) {
  const auto token_or_null = [](int id) { return id >= 0 ? nlohmann::json(id) : nlohmann::json(); };
  const nlohmann::ordered_json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"dtype", "float32"},
      {"vocab_size", m.vocab},
      {"hidden_size", m.dim},
      {"intermediate_size", m.ffn},
      {"num_hidden_layers", m.layers},
      {"num_attention_heads", m.heads},
      {"num_key_value_heads", m.kv_heads},
      {"head_dim", m.dim / m.heads},
      {"max_position_embeddings", m.seq},
      {"rms_norm_eps", m.norm_eps},
      // Both spellings: transformers 5 reads rope_parameters, 4.x rope_theta.
      {"rope_theta", m.rope_theta},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", m.rope_theta}}},
      {"tie_word_embeddings", m.tie_embeddings},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"bos_token_id", token_or_null(bos_id)},
      {"eos_token_id", token_or_null(eos_id)}};
  return config.dump(2) + "\n";
}

void write_hugging_face_directory(const std::string& dir, const ModelConfig& model,
                                  const std::vector<checkpoint::NamedTensor>& tensors, int bos_id,
                                  int eos_id) {
  fs::create_directories(dir);
  checkpoint::write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors);
  std::ofstream(fs::path(dir) / "config.json") << hugging_face_config_json(model, bos_id, eos_id);
}

}  // namespace atl::runtime
