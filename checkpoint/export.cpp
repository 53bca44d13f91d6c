#include "checkpoint/export.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/safetensors.h"

namespace atl::checkpoint {
namespace {

// The manifest's model description ("vocab=256 dim=64 ...") as key -> value.
std::map<std::string, std::string> model_fields(const std::string& description) {
  std::map<std::string, std::string> fields;
  std::istringstream in(description);
  std::string pair;
  while (in >> pair) {
    const size_t eq = pair.find('=');
    if (eq != std::string::npos) fields[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return fields;
}

std::string hugging_face_config(const std::map<std::string, std::string>& m) {
  const auto field = [&m](const std::string& key) {
    auto it = m.find(key);
    if (it == m.end()) throw CheckpointError("checkpoint: the manifest's model lacks " + key);
    return it->second;
  };
  const auto integer = [&field](const std::string& key) { return std::stoll(field(key)); };
  const auto real = [&field](const std::string& key) { return std::stod(field(key)); };
  const nlohmann::ordered_json config = {{"architectures", {"LlamaForCausalLM"}},
                                         {"model_type", "llama"},
                                         {"hidden_act", "silu"},
                                         {"torch_dtype", "float32"},
                                         {"vocab_size", integer("vocab")},
                                         {"hidden_size", integer("dim")},
                                         {"intermediate_size", integer("ffn")},
                                         {"num_hidden_layers", integer("layers")},
                                         {"num_attention_heads", integer("heads")},
                                         {"num_key_value_heads", integer("kv_heads")},
                                         {"max_position_embeddings", integer("seq")},
                                         {"rms_norm_eps", real("norm_eps")},
                                         {"rope_theta", real("rope_theta")},
                                         {"tie_word_embeddings", field("tie_embeddings") == "true"},
                                         {"attention_bias", false},
                                         {"mlp_bias", false}};
  return config.dump(2) + "\n";
}

}  // namespace

std::map<std::string, at::Tensor> consolidated(const std::string& checkpoint_dir, proto::Role role) {
  const proto::Manifest manifest = read_manifest(checkpoint_dir);
  // The lowest island's copy: island 0's in a single world, the job's own for an island job.
  int island = std::numeric_limits<int>::max();
  for (const proto::Tensor& t : manifest.tensors())
    if (t.role() == role) island = std::min(island, static_cast<int>(t.island()));
  std::map<std::string, at::Tensor> tensors;
  for (const proto::Tensor& t : manifest.tensors()) {
    if (t.role() != role || static_cast<int>(t.island()) != island) continue;
    at::Tensor full =
        at::zeros(std::vector<int64_t>(t.global_shape().begin(), t.global_shape().end()), at::kFloat);
    for (const proto::Chunk& c : t.chunks()) {
      at::Tensor region = full;
      for (int d = 0; d < c.offsets_size(); ++d) region = region.narrow(d, c.offsets(d), c.sizes(d));
      region.copy_(
          read_chunk(checkpoint_dir, t, c).view(std::vector<int64_t>(c.sizes().begin(), c.sizes().end())));
    }
    tensors[t.name()] = full;
  }
  return tensors;
}

int export_consolidated(const std::string& checkpoint_dir, const std::string& out_file) {
  std::vector<NamedTensor> tensors;  // sorted by name, as the map is
  // Islands: phi, the parameters the islands agree on, when the checkpoint has an outer optimizer.
  const proto::Manifest manifest = read_manifest(checkpoint_dir);
  const bool has_outer = std::any_of(manifest.tensors().begin(), manifest.tensors().end(),
                                     [](const proto::Tensor& t) { return t.role() == proto::OUTER_PARAM; });
  for (auto& [name, tensor] : consolidated(checkpoint_dir, has_outer ? proto::OUTER_PARAM : proto::PARAM))
    tensors.push_back({name, tensor});
  const std::filesystem::path out(out_file);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  write_safetensors(out.string(), tensors);
  std::ofstream(out.parent_path() / "config.json")
      << hugging_face_config(model_fields(read_manifest(checkpoint_dir).model_config()));
  return static_cast<int>(tensors.size());
}

}  // namespace atl::checkpoint
