// A TrainedModel as the training code's own LlamaModel in one process (tensor-parallel size 1 over
// a group of one): the same forward and loss the trainer computes, for `atoll eval` and for the
// checks of the cached decoder and of exported models.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "comm/single_rank_communicator.h"
#include "parallel/flat_parameters.h"
#include "runtime/inference/trained_model.h"
#include "runtime/model/llama.h"

namespace atl::runtime {

class LocalModel {
 public:
  explicit LocalModel(const TrainedModel& trained);

  const ModelConfig& config() const { return config_; }
  // Logits over the vocabulary (unpadded), fp32: [batch, seq, vocab] for tokens int64 [batch, seq]
  // with seq <= model.seq; `document_ids` as loss takes them.
  at::Tensor logits(const at::Tensor& tokens, const at::Tensor& document_ids = {}) const;
  // Mean next-token cross-entropy, as in training; `document_ids` as LlamaModel::forward takes
  // them (with model.document_mask), undefined for causal attention over the whole sequence.
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets,
                  const at::Tensor& document_ids = {}) const;

 private:
  ModelConfig config_;
  std::unique_ptr<comm::SingleRankCommunicator> self_;
  std::unique_ptr<parallel::FlatParameters> params_;
  std::unique_ptr<LlamaModel> model_;
};

}  // namespace atl::runtime
