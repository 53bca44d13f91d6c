// A checkpoint's tensors of one role assembled whole, whatever layout it was saved under: what
// `atoll ckpt export`, `atoll eval` and `atoll sample` read (runtime/inference/trained_model.h).
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

}  // namespace atl::checkpoint
