#include "runtime/inference/trained_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/checkpoint_store.h"
#include "checkpoint/consolidated.h"
#include "runtime/model/hugging_face.h"
#include "runtime/model/llama.h"
#include "runtime/model/model_description.h"

namespace atl::runtime {
namespace fs = std::filesystem;
namespace {

TrainedModel from_checkpoint(const std::string& dir) {
  const checkpoint::proto::Manifest manifest = checkpoint::read_manifest(dir);
  TrainedModel model;
  model.config = model_from_description(manifest.model_config());
  // Islands: phi, the parameters the islands agree on, when the checkpoint has an outer optimizer.
  const bool has_outer = std::any_of(manifest.tensors().begin(), manifest.tensors().end(), [](const auto& t) {
    return t.role() == checkpoint::proto::OUTER_PARAM;
  });
  model.weights =
      checkpoint::consolidated(dir, has_outer ? checkpoint::proto::OUTER_PARAM : checkpoint::proto::PARAM);
  // What eval, sample and export build from the weights assumes they are this model's.
  try {
    check_weights_match(model.config, model.weights, "checkpoint " + dir,
                        ": the manifest does not describe its own weights; the checkpoint is damaged");
  } catch (const std::invalid_argument& e) {
    throw checkpoint::CheckpointDamaged(e.what());
  }
  model.tokenizer = tokenizer_from_serialized(manifest.tokenizer());
  model.source = "checkpoint " + dir + " (step " + std::to_string(manifest.step()) + ")";
  return model;
}

TrainedModel from_hugging_face(const std::string& dir) {
  TrainedModel model;
  model.config = read_hugging_face_config(dir);
  model.weights = read_initial_weights(model.config, dir);
  for (auto& [name, tensor] : model.weights) tensor = tensor.to(at::kFloat);
  // A SentencePiece tokenizer.model (Llama 2 style), else a tokenizer.json (Llama 3 style, or an
  // export of a run with Llama 3's tokenizer), else bytes.
  std::string tokenizer_file;
  for (const char* name : {"tokenizer.model", "tokenizer.json"})
    if (tokenizer_file.empty() && fs::exists(fs::path(dir) / name))
      tokenizer_file = (fs::path(dir) / name).string();
  model.tokenizer = tokenizer_file.empty() ? byte_tokenizer() : load_tokenizer(tokenizer_file);
  if (model.tokenizer->vocab_size() > model.config.vocab)
    throw std::invalid_argument(
        dir + ": the tokenizer has " + std::to_string(model.tokenizer->vocab_size()) +
        " pieces but the model's vocab_size is " + std::to_string(model.config.vocab) +
        (!tokenizer_file.empty()
             ? "; put the model's own " + fs::path(tokenizer_file).filename().string() + " beside it"
             : "; a directory without tokenizer.model or tokenizer.json is byte-level "
               "(vocab_size >= 256)"));
  model.source = "Hugging Face directory " + dir;
  return model;
}

}  // namespace

std::string checkpoint_in(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "manifest.pb")) return dir;
  std::ifstream latest(fs::path(dir) / "LATEST");
  std::string named;
  if (latest >> named) return (fs::path(dir) / named).string();
  return dir;
}

TrainedModel load_trained_model(const std::string& path) {
  if (!fs::is_directory(path))
    throw std::invalid_argument(path +
                                " is not a directory; pass a checkpoint (run/checkpoints or its step-N) "
                                "or a Hugging Face model directory");
  if (is_hugging_face_directory(path)) return from_hugging_face(path);
  if (fs::exists(fs::path(path) / "manifest.pb")) return from_checkpoint(path);
  // A checkpoints folder: the newest checkpoint that loads, as checkpoint.resume: auto takes it.
  const std::vector<std::string> committed = checkpoint::committed_checkpoints(path);
  if (committed.empty())
    throw std::invalid_argument(
        path +
        " holds neither a checkpoint (manifest.pb, or step-N folders) nor a Hugging Face "
        "model (config.json); pass run/checkpoints, a step-N in it, or an export");
  std::string skipped;
  for (const std::string& dir : committed) {
    try {
      TrainedModel model = from_checkpoint(dir);
      if (!skipped.empty()) model.source += "; skipped " + skipped;
      return model;
    } catch (const checkpoint::CheckpointDamaged& e) {
      // Only damage is skipped: a format this build does not read, or a tokenizer or model
      // description it cannot take, would be just as wrong in an older checkpoint's place.
      if (dir == committed.back()) throw;
      skipped += (skipped.empty() ? "" : ", ") + fs::path(dir).filename().string() + " (" + e.what() + ")";
    }
  }
  throw std::logic_error("load_trained_model: unreachable");
}

int export_hugging_face(const std::string& checkpoint, const std::string& out) {
  const TrainedModel model = from_checkpoint(checkpoint_in(checkpoint));
  std::vector<checkpoint::NamedTensor> tensors;  // sorted by name, as the map is
  for (const auto& [name, tensor] : model.weights) tensors.push_back({name, tensor});
  const int bos = model.tokenizer->bos_id(), eos = model.tokenizer->eos_id();
  if (fs::path(out).extension() == ".safetensors") {
    const fs::path file(out);
    if (file.has_parent_path()) fs::create_directories(file.parent_path());
    checkpoint::write_safetensors(file.string(), tensors);
    std::ofstream(file.parent_path() / "config.json") << hugging_face_config_json(model.config, bos, eos);
    return static_cast<int>(tensors.size());
  }
  write_hugging_face_directory(out, model.config, tensors, bos, eos);
  for (const HuggingFaceFile& file : model.tokenizer->hugging_face_files(model.config.seq))
    std::ofstream(fs::path(out) / file.name, std::ios::binary) << file.contents;
  return static_cast<int>(tensors.size());
}

}  // namespace atl::runtime
