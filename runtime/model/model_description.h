// The model section as one line of key=value pairs ("vocab=256 dim=64 ... norm_eps=1e-05"): what a
// checkpoint's manifest records, so a checkpoint loads only into the model it was saved for, and
// what `atoll eval` / `atoll sample` rebuild the model from without the run's config.
#pragma once

#include <string>

#include "runtime/config/config.h"

namespace atl::runtime {

// Every architecture field of `model` (not init_std or init_from, which do not change the model),
// and " document_mask=true" at the end when attention keeps documents apart (absent otherwise, as in
// checkpoints written before it was recorded): eval and sample mask as training did.
std::string describe_model(const ModelConfig& model);

// Whether a checkpoint's description is of the same architecture as `model`: document_mask aside,
// which changes what attention sees but not the weights (a run may switch it on or off at resume).
bool same_architecture(const std::string& description, const ModelConfig& model);

// The inverse of describe_model; std::invalid_argument naming the missing or malformed field.
ModelConfig model_from_description(const std::string& description);

}  // namespace atl::runtime
