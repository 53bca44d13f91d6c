// Data-parallel gradient reduction with bucketing and overlap (DESIGN §5, ZeRO stage 0).
//
// The gradient buffer of FlatParameters (laid out in backward order) is cut into buckets of about
// `bucket_bytes`, at parameter boundaries. A post-hook on each parameter's gradient accumulator
// counts the gradients that are ready; when the last one of a bucket arrives, that bucket's
// all-reduce (average over the dp group) starts at once, while backward computes the next
// buckets. Gradient accumulation: each parameter's gradient is ready once per backward, so a
// bucket is complete after `backwards_per_step` arrivals of each of its parameters -- the
// gradients of all microbatches are summed locally and reduced once, and under a pipeline
// schedule each chunk's buckets start as soon as that chunk's last backward is done.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "parallel/flat_parameters.h"

namespace atl::parallel {

class DataParallelReducer {
 public:
  DataParallelReducer(const FlatParameters& params, comm::Communicator& dp_group, int64_t bucket_bytes);
  ~DataParallelReducer();
  DataParallelReducer(const DataParallelReducer&) = delete;
  DataParallelReducer& operator=(const DataParallelReducer&) = delete;

  // Call before the step's first backward: each parameter will receive `backwards_per_step`
  // gradients (one per microbatch) before its bucket is reduced.
  void start_step(int backwards_per_step);
  // Waits for every bucket's reduction; afterwards grads() holds the dp-averaged gradient.
  // Launches any bucket whose hooks did not all fire (a parameter unused in this step).
  void finish();

  struct Bucket {
    int64_t offset = 0, numel = 0;  // slice of the flat gradient buffer
    int pending = 0;                // gradients not yet ready in this backward
    int num_params = 0;
    comm::WorkPtr work;
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  class ReadyHook;
  void on_gradient_ready(size_t bucket_index);
  void launch(Bucket& bucket);

  const FlatParameters& params_;
  comm::Communicator& group_;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps each gradient accumulator (and its hook) alive
  size_t next_launch_ = 0;                           // buckets before it have been launched
  bool step_started_ = false;
};

}  // namespace atl::parallel
