// Data parallelism with ZeRO stages 0-3 over one FlatParameters (DESIGN §5; ZeRO, Rajbhandari et
// al. 2020; Megatron's distributed optimizer).
//
// Each bucket of the flat buffers splits into dp equal pieces; dp rank r owns piece r of every
// bucket and its optimizer state. Gradient reduction starts from autograd hooks as soon as a
// bucket's last gradient has landed, overlapping the rest of backward:
//
//   stage 0  all-reduce (average) of each bucket; every rank steps the whole model.
//   stage 1  reduce-scatter of each bucket into this rank's gradient shard; the optimizer steps only
//            the owned pieces (moments for 1/dp of the model); an all-gather of each bucket after the
//            step brings every rank the updated parameters, and the next forward waits for a unit's
//            gather only when it reaches that unit.
//   stage 2  as 1, and a bucket's gradients are freed once reduce-scattered: they exist only while
//            backward fills them. With gradient accumulation each microbatch is reduce-scattered and
//            summed into the shard (DeepSpeed's choice: memory over bytes sent).
//   stage 3  as 2, and parameters are sharded too: a unit (layer) is all-gathered just before its
//            forward and again before its backward, freed after each, and the next unit's gather is
//            started while the current one computes.
//
// Worked example, dp = 2, one bucket holding parameters a (3 elements) and b (2), align 1:
// the bucket is padded to 6 = [a0 a1 a2 b0 b1 _]; rank 0 owns [a0 a1 a2], rank 1 [b0 b1 _]. Under
// stage >= 1 rank 1's optimizer holds moments for 3 elements and updates b0, b1 (and the zero pad).
//
// Collectives are issued from the hooks in the order gradients land. Every dp rank runs the same
// graph in the same schedule, and the autograd engine runs ready nodes in a fixed priority order,
// so the order is the same on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "parallel/flat_parameters.h"
#include "parallel/parameter_gate.h"
#include "parallel/weight_gradient_sink.h"

namespace atl::parallel {

// The layout a ZeRO stage needs from FlatParameters: equal aligned pieces per dp rank, separate
// storages for what the stage frees, a bucket per unit under stage 3.
FlatLayout zero_layout(int zero_stage, int dp, int64_t bucket_bytes, int64_t element_bytes);

// Bytes of model state this rank holds right now, measured from the live allocations.
struct ModelStateBytes {
  uint64_t parameters = 0, gradients = 0, optimizer = 0;
  uint64_t total() const { return parameters + gradients + optimizer; }
};

// A run of elements in the optimizer's coordinates (the concatenation of optimizer_values()).
struct ShardSpan {
  int64_t offset;
  int64_t numel;
};

class ShardedDataParallel final : public ParameterGate, public WeightGradientSink {
 public:
  // `params` must be laid out by zero_layout(zero_stage, dp_group.size(), ...) and hold the same
  // (initialised) values on every dp rank; stage 3 keeps only this rank's pieces from then on.
  // Parameters in a 16-bit dtype get fp32 master weights here (mixed precision). `reduce_dtype`:
  // the dtype gradients are reduced in (Undefined: the gradient buffers' own). `first_grad_copy`
  // (stages 0-1): autograd hands each gradient to this engine, which copies a parameter's first one of
  // the step into the flat buffer and adds the later ones -- no zeroing pass over the buffer, and no
  // read of its zeros; otherwise autograd adds into the zeroed buffer itself. The same sums either way.
  // `fused_weight_gradients` (with first_grad_copy): the engine is also a WeightGradientSink for
  // every 2-D parameter, so linear layers write their weight gradients into the buffer themselves.
  ShardedDataParallel(FlatParameters& params, comm::Communicator& dp_group, int zero_stage,
                      at::ScalarType reduce_dtype = at::ScalarType::Undefined, bool first_grad_copy = false,
                      bool fused_weight_gradients = false);
  ~ShardedDataParallel() override;
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  int stage() const { return stage_; }

  // Before the step's first backward: each parameter receives gradients in `backwards_per_step`
  // backwards.
  void start_step(int backwards_per_step);
  // Before each backward of the step (each microbatch's; under an interleaved pipeline each
  // chunk's). A parameter arrives once per backward, however often it lands in it: with the last of
  // the landings it made in one backward before (the first step learns them and reduces a stage 0-1
  // bucket only in finish(); stages 2-3 sum a landing past its round into the next one).
  void start_backward();
  // Waits for every reduction. Afterwards optimizer_grads() hold the dp-averaged gradients of what
  // this rank owns.
  void finish();

  // What the optimizer updates: fp32 segments of parameter values -- the fp32 master weights
  // under mixed precision, else the parameters themselves (stage 0: the whole buffer; 1-2: the owned
  // piece of each bucket; 3: the parameter shard) -- and their gradients, one contiguous tensor of
  // the segments' total length in the same order.
  const std::vector<at::Tensor>& optimizer_values() const { return optimizer_values_; }
  const at::Tensor& optimizer_grads() const { return optimizer_grads_; }
  // Where this rank's owned elements of the entries for which `keep` holds sit in the optimizer's
  // coordinates (neighbours merged): weight-decay runs, and the gradient pieces of the norm.
  std::vector<ShardSpan> owned_spans(const std::function<bool(const FlatEntry&)>& keep) const;
  // This rank's owned elements of each parameter (at most one run per entry): what a checkpoint
  // saves and loads.
  struct OwnedRun {
    size_t entry;
    int64_t entry_offset;  // first owned element within the parameter
    int64_t numel;
    int64_t offset;  // in the optimizer's coordinates
  };
  std::vector<OwnedRun> owned_runs() const;
  // The optimizer's values (fp32) at [offset, offset + numel) of its coordinates, within one segment.
  at::Tensor optimizer_values_at(int64_t offset, int64_t numel) const;
  // The owned gradient piece of bucket `bucket`: same shape on every rank holding an equal bucket.
  at::Tensor owned_bucket_gradient(size_t bucket) const;
  // Whether the gradient pieces of different dp ranks are disjoint (stages >= 1): sums over them
  // must then be completed over the dp group.
  bool gradients_sharded() const { return stage_ >= 1; }

  // After the optimizer step: copies fp32 master weights into the compute parameters (mixed
  // precision); stages 1-2 start the all-gathers that bring every rank the updated parameters
  // (waited for unit by unit in the next forward).
  void after_optimizer_step();
  // Makes every parameter present and current (waits for gathers; stage 3 gathers all); then
  // release_all() frees what stage 3 does not keep. For evaluation outside the gate and for tests.
  void gather_all();
  void release_all();

  // Parameters, gradients and master weights (as `optimizer`); the optimizer adds its moments.
  ModelStateBytes state_bytes() const;

  // ParameterGate.
  void acquire(int unit, int next) override;
  at::Tensor release_after(int unit, const at::Tensor& output, int backward_next) override;

  // WeightGradientSink (with fused_weight_gradients; else it receives nothing).
  bool receives(const at::Tensor& weight) const override;
  void land_weight_gradient(const at::Tensor& weight, const at::Tensor& dy_rows,
                            const at::Tensor& x_rows) override;

 private:
  struct BucketState;
  class GradientLanded;
  void before_accumulate(size_t bucket);
  void land_gradient(size_t entry, const at::Tensor& param);
  void zero_unlanded_gradients();
  void check_can_land(size_t entry) const;
  void on_gradient_ready(size_t entry);
  void launch_reduction(size_t bucket);
  void complete_reduction(size_t bucket);
  void poll();
  void start_gather(size_t bucket);
  void wait_gather(size_t bucket);
  void release_values(size_t bucket);
  const std::vector<size_t>& buckets_of(int unit) const;
  at::Tensor owned_values(size_t bucket) const;
  std::vector<at::Tensor> compute_pieces() const;

  FlatParameters& params_;
  comm::Communicator& group_;
  int stage_;
  at::ScalarType reduce_dtype_;
  std::vector<BucketState> buckets_;
  std::unordered_map<int, std::vector<size_t>> unit_buckets_;
  at::Tensor value_shard_;  // stage 3: this rank's pieces of every bucket, contiguous
  at::Tensor grad_shard_;   // stages >= 1: the reduced gradients of the owned pieces
  at::Tensor master_;       // mixed precision: fp32 master weights of what this rank owns
  std::vector<at::Tensor> optimizer_values_;
  at::Tensor optimizer_grads_;
  struct HookedParameter {
    at::Tensor param;      // holds a GradientLanded hook
    unsigned before_hook;  // the id of its tensor hook (before accumulation)
  };
  std::vector<HookedParameter> hooked_;
  int arrivals_per_round_ = 1;
  bool step_started_ = false;
  bool in_backward_ = false;       // start_backward was called this step
  bool landings_learned_ = false;  // a step has finished: landings_expected_ holds what it saw
  bool first_grad_copy_ = false;
  std::vector<char> landed_;  // first_grad_copy: whether each entry's gradient landed this step
  // Each entry's landings in the current backward, and the most it made in one backward so far: it
  // arrives (counts towards its bucket's round) with the landing that reaches that number.
  std::vector<int> landings_, landings_expected_;
  // Set by an entry's tensor hook when a defined gradient is about to accumulate, taken by its
  // GradientLanded hook.
  std::vector<char> incoming_;
  // fused_weight_gradients: the entry of each 2-D parameter, by the address of its values.
  std::unordered_map<const void*, size_t> sink_entries_;
};

}  // namespace atl::parallel
