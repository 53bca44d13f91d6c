// train.sample_every: text from the model being trained, as llm.c prints during training. Every
// rank's piece of island 0's parameters goes into the canonical (whole, unpadded) tensors by one
// all-reduce, each element contributed once; rank 0 then generates with the KV cache.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/device_mesh.h"
#include "parallel/flat_parameters.h"
#include "runtime/config/config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace atl::runtime {

// data.tokenizer, loaded and checked: a subword model has model.vocab pieces (the shards' ids are
// its), and train.sample_prompt fits in model.seq when samples are asked for. Throws ConfigError.
std::unique_ptr<Tokenizer> load_training_tokenizer(const Config& config);

// The canonical weights on every rank of `world`, from each rank's `pieces` (its tensor- and
// pipeline-parallel piece of each parameter, not dp-sharded: Trainer::full_parameters()). Collective.
std::map<std::string, at::Tensor> gather_canonical_weights(const Config& config, const comm::DeviceMesh& mesh,
                                                           const parallel::FlatParameters& params,
                                                           const std::map<std::string, at::Tensor>& pieces,
                                                           comm::Communicator& world);

// train.sample_tokens tokens after train.sample_prompt (temperature 1, top-k 40, seed run.seed + step).
std::string sample_text(const Config& config, const std::map<std::string, at::Tensor>& weights,
                        const Tokenizer& tokenizer, int64_t step);

}  // namespace atl::runtime
