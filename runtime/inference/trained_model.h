// A trained model in one process: its architecture, canonical weights and tokenizer, read from a
// checkpoint of any layout (a step-N directory, or a checkpoint directory whose LATEST names one;
// with islands, phi -- the parameters the islands agree on) or from a Hugging Face Llama directory
// (save_pretrained, atoll ckpt export). What `atoll eval`, `atoll sample` and `atoll ckpt export`
// start from.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "runtime/config/config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

struct TrainedModel {
  ModelConfig config;
  std::map<std::string, at::Tensor> weights;  // canonical names and shapes, fp32
  std::unique_ptr<Tokenizer> tokenizer;
  std::string source;  // "checkpoint DIR (step N)" or "Hugging Face directory DIR"
};

// DIR itself when it holds a manifest, else the checkpoint its LATEST names (else DIR: the reader
// explains what is missing).
std::string checkpoint_in(const std::string& dir);

// PATH: a checkpoint (step-N), a checkpoints folder -- its newest checkpoint that loads, damaged ones
// skipped and named in `source`, as checkpoint.resume: auto does -- or a Hugging Face directory.
// std::invalid_argument (one line naming the path and the fix) for a path that is neither, or a
// Hugging Face directory of another architecture, with missing tensors, or whose tokenizer
// (tokenizer.model, else tokenizer.json) does not match its vocab_size; checkpoint::CheckpointError for a damaged checkpoint.
TrainedModel load_trained_model(const std::string& path);

// `atoll ckpt export`: the checkpoint's weights under Hugging Face names in fp32. OUT ending in
// .safetensors: that file and config.json beside it; otherwise the directory OUT with
// model.safetensors, config.json, and the tokenizer's files (Tokenizer::hugging_face_files: a
// SentencePiece tokenizer.model, or a tokenizer.json, with a tokenizer_config.json) that
// transformers' AutoTokenizer loads. Returns the number of tensors written.
int export_hugging_face(const std::string& checkpoint, const std::string& out);

}  // namespace atl::runtime
