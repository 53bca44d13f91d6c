// `atoll ckpt export`: one consolidated safetensors file of a checkpoint's parameters under their
// canonical (Hugging Face Llama) names and global shapes, fp32, plus a config.json beside it that
// transformers.LlamaForCausalLM accepts -- whatever layout the checkpoint was saved under.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "checkpoint/manifest.pb.h"

namespace atl::checkpoint {

// Every tensor of `role` in the checkpoint, assembled from its chunks into its global shape (fp32),
// by canonical name (the lowest island's copy where islands saved their own: island 0's, or an island job's
// own). CheckpointError on a damaged checkpoint.
std::map<std::string, at::Tensor> consolidated(const std::string& checkpoint_dir, proto::Role role);

// Writes OUT (safetensors) and config.json in OUT's directory: the parameters, or with islands the
// outer optimizer's phi, the parameters the islands agree on. CheckpointError on a damaged
// checkpoint. Returns the number of tensors written.
int export_consolidated(const std::string& checkpoint_dir, const std::string& out_file);

}  // namespace atl::checkpoint
