#include "parallel/data_parallel.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>

namespace atl::parallel {

// Runs after a parameter's AccumulateGrad node, i.e. once its gradient has landed in the flat buffer.
class DataParallelReducer::ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(DataParallelReducer& reducer, size_t bucket) : reducer_(reducer), bucket_(bucket) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_.on_gradient_ready(bucket_);
    return outputs;
  }

 private:
  DataParallelReducer& reducer_;
  size_t bucket_;
};

DataParallelReducer::DataParallelReducer(const FlatParameters& params, comm::Communicator& dp_group,
                                         int64_t bucket_bytes)
    : params_(params), group_(dp_group) {
  const int64_t element_bytes = params.grads().element_size();
  const int64_t bucket_numel = std::max<int64_t>(1, bucket_bytes / element_bytes);
  std::vector<size_t> bucket_of_entry;
  for (const FlatEntry& e : params.entries()) {
    if (buckets_.empty() || buckets_.back().numel >= bucket_numel) {
      Bucket bucket;
      bucket.offset = e.offset;
      buckets_.push_back(bucket);
    }
    buckets_.back().numel += e.numel;
    buckets_.back().num_params += 1;
    bucket_of_entry.push_back(buckets_.size() - 1);
  }
  if (group_.size() == 1) return;  // nothing to reduce: no hooks, no overhead
  for (size_t i = 0; i < params.entries().size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(params.entries()[i].value);
    accumulator->add_post_hook(std::make_unique<ReadyHook>(*this, bucket_of_entry[i]));
    accumulators_.push_back(std::move(accumulator));
  }
}

DataParallelReducer::~DataParallelReducer() {
  // Hooks point at this object: drain in-flight reductions before the buffers can go away.
  for (Bucket& b : buckets_)
    if (b.work) b.work->wait();
}

void DataParallelReducer::start_step(int backwards_per_step) {
  step_started_ = group_.size() > 1;
  for (Bucket& b : buckets_) {
    b.pending = b.num_params * backwards_per_step;
    b.work.reset();
  }
  next_launch_ = 0;
}

void DataParallelReducer::on_gradient_ready(size_t bucket_index) {
  if (!step_started_) return;
  --buckets_[bucket_index].pending;
  // Launch strictly in bucket order: collectives must be issued in the same order on every rank,
  // whatever order the hooks happen to fire in.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0)
    launch(buckets_[next_launch_++]);
  // MPI progresses non-blocking collectives only inside MPI calls: poll the ones in flight.
  for (Bucket& b : buckets_)
    if (b.work) b.work->test();
}

void DataParallelReducer::launch(Bucket& bucket) {
  bucket.work =
      group_.all_reduce(params_.grads().narrow(0, bucket.offset, bucket.numel), comm::ReduceOp::kAvg);
}

void DataParallelReducer::finish() {
  if (!step_started_) return;
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (Bucket& b : buckets_) b.work->wait();
  step_started_ = false;
}

}  // namespace atl::parallel
