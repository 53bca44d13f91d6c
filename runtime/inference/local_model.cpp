#include "runtime/inference/local_model.h"

#include <ATen/ATen.h>

namespace atl::runtime {

LocalModel::LocalModel(const TrainedModel& trained)
    : config_(trained.config),
      self_(std::make_unique<comm::SingleRankCommunicator>("tp")),
      params_(std::make_unique<parallel::FlatParameters>(LlamaModel::param_infos(config_), at::kFloat)) {
  load_initial_weights(config_, trained.weights, *params_, 1, 0);
  model_ = std::make_unique<LlamaModel>(config_, *params_, *self_);
}

at::Tensor LocalModel::logits(const at::Tensor& tokens, const at::Tensor& document_ids) const {
  at::NoGradGuard no_grad;
  return model_->forward(tokens, document_ids).narrow(-1, 0, config_.vocab);
}

at::Tensor LocalModel::loss(const at::Tensor& tokens, const at::Tensor& targets,
                            const at::Tensor& document_ids) const {
  at::NoGradGuard no_grad;
  return model_->loss_of(model_->forward(tokens, document_ids), targets);
}

}  // namespace atl::runtime
