// Hugging Face Llama model directories, both ways: config.json (LlamaConfig) with the weights in
// model.safetensors or in shards listed by model.safetensors.index.json -- what
// transformers' save_pretrained writes and what `atoll ckpt export` writes for
// transformers.LlamaForCausalLM.from_pretrained.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "runtime/config/config.h"

namespace atl::runtime {

// Whether `path` is a directory with a config.json.
bool is_hugging_face_directory(const std::string& path);

// The model of DIR/config.json. std::invalid_argument with one line naming the file and the problem
// for a directory of another architecture (Atoll's Llama: silu, no biases, default RoPE, head_dim =
// hidden_size / heads) or a malformed config.
ModelConfig read_hugging_face_config(const std::string& dir);

// Every tensor in DIR's safetensors (model.safetensors, or each file the index names), by name.
// std::invalid_argument naming the file for a missing or malformed file.
std::map<std::string, at::Tensor> read_hugging_face_weights(const std::string& dir);

// Writes DIR/config.json for `model` and DIR/model.safetensors with `tensors` (creating DIR).
// `special_tokens`: bos/eos ids of the tokenizer, -1 where it has none.
void write_hugging_face_directory(const std::string& dir, const ModelConfig& model,
                                  const std::vector<checkpoint::NamedTensor>& tensors, int bos_id = -1,
                                  int eos_id = -1);

// config.json of `model` alone (export into a named .safetensors file writes it beside the file).
std::string hugging_face_config_json(const ModelConfig& model, int bos_id = -1, int eos_id = -1);

}  // namespace atl::runtime
