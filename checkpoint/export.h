// `atoll ckpt export`: one consolidated safetensors file of a checkpoint's parameters under their
// canonical (Hugging Face Llama) names and global shapes, fp32, plus a config.json beside it that
// transformers.LlamaForCausalLM accepts -- whatever layout the checkpoint was saved under.
#pragma once

#include <string>

namespace atl::checkpoint {

// Writes OUT (safetensors) and config.json in OUT's directory; CheckpointError on a damaged
// checkpoint. Returns the number of tensors written.
int export_consolidated(const std::string& checkpoint_dir, const std::string& out_file);

}  // namespace atl::checkpoint
