#include "runtime/training_sample.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "runtime/inference/cached_decoder.h"
#include "runtime/inference/sampling.h"
#include "runtime/model/llama.h"

namespace atl::runtime {

std::unique_ptr<Tokenizer> load_training_tokenizer(const Config& config) {
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(config.data.tokenizer);
  if (config.data.tokenizer != kByteTokenizer && tokenizer->vocab_size() != config.model.vocab)
    throw ConfigError({"data.tokenizer: " + config.data.tokenizer + " has " +
                       std::to_string(tokenizer->vocab_size()) + " pieces but model.vocab is " +
                       std::to_string(config.model.vocab) +
                       "; set model.vocab: " + std::to_string(tokenizer->vocab_size())});
  const std::string& text = config.train.sample_prompt;
  const size_t prompt = text.empty() ? 0 : encode_prompt(*tokenizer, text).size();
  if (config.train.sample_every > 0 && (prompt == 0 || prompt > static_cast<size_t>(config.model.seq)))
    throw ConfigError({"train.sample_prompt: '" + config.train.sample_prompt + "' is " +
                       std::to_string(prompt) +
                       " tokens; give it 1 to model.seq = " + std::to_string(config.model.seq)});
  return tokenizer;
}

std::map<std::string, at::Tensor> gather_canonical_weights(const Config& config, const comm::DeviceMesh& mesh,
                                                           const parallel::FlatParameters& params,
                                                           const std::map<std::string, at::Tensor>& pieces,
                                                           comm::Communicator& world) {
  const ModelConfig& model = config.model;
  const comm::MeshCoord coord = mesh.coord();
  // One flat buffer of every canonical tensor (vocabulary rows unpadded), so one all-reduce does it.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  int64_t total = 0;
  for (const parallel::ParamInfo& info : LlamaModel::param_infos(model)) {
    const LlamaModel::Piece whole = LlamaModel::piece_of(model, 1, 0, info.name);
    shapes.emplace_back(info.name, whole.global_shape);
    total += c10::multiply_integers(whole.global_shape);
  }
  at::Tensor flat = at::zeros({total});
  std::map<std::string, at::Tensor> weights;
  int64_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    const int64_t numel = c10::multiply_integers(shape);
    weights[name] = flat.narrow(0, offset, numel).view(shape);
    offset += numel;
  }
  // Island 0's dp rank 0 (cp rank 0) contributes its pieces; a tp-replicated norm comes from tp rank 0 only,
  // and a tied embedding's copy on the last stage not at all.
  if (coord.island == 0 && coord.dp == 0 && coord.cp == 0) {
    for (const parallel::FlatEntry& e : params.entries()) {
      if (e.info.duplicate || (e.info.replicated_in_model_group && coord.tp != 0)) continue;
      const LlamaModel::Piece piece = LlamaModel::piece_of(model, config.parallel.tp, coord.tp, e.info.name);
      at::Tensor source = pieces.at(e.info.name).to(at::kCPU, at::kFloat);
      at::Tensor target = weights.at(e.info.name);
      for (size_t d = 0; d < piece.offsets.size(); ++d) {
        // Padding rows of the vocabulary run past the canonical rows: they are not copied.
        const int64_t start = std::min(piece.offsets[d], target.size(d));
        const int64_t count = std::min(piece.sizes[d], target.size(d) - start);
        target = target.narrow(d, start, count);
        source = source.narrow(d, 0, count);
      }
      target.copy_(source);
    }
  }
  world.all_reduce(flat, comm::ReduceOp::kSum)->wait();
  return weights;
}

std::string sample_text(const Config& config, const std::map<std::string, at::Tensor>& weights,
                        const Tokenizer& tokenizer, int64_t step) {
  TrainedModel trained;
  trained.config = config.model;
  trained.weights = weights;
  CachedDecoder decoder(trained, {tokenizer.bos_id(), tokenizer.eos_id()});
  const std::vector<uint32_t> prompt = encode_prompt(tokenizer, config.train.sample_prompt);
  SamplingOptions options;
  options.max_tokens = config.train.sample_tokens;
  options.temperature = 1.0;
  options.top_k = 40;
  options.seed = static_cast<uint64_t>(config.run.seed + step);
  options.stop_token = tokenizer.eos_id();
  const std::vector<int64_t> tokens =
      generate(decoder, std::vector<int64_t>(prompt.begin(), prompt.end()), options);
  return tokenizer.decode(std::vector<uint32_t>(tokens.begin(), tokens.end()));
}

}  // namespace atl::runtime
