// The outer optimizer of islands training (DESIGN §6): DiLoCo, Streaming DiLoCo, one-step-delayed
// DiLoCo and NoLoCo over the inner optimizer's fp32 values (theta).
//
// The outer state -- phi, the parameters the islands agree on, and the outer momentum -- is kept
// in host memory in the inner optimizer's coordinates, so each rank holds the outer state of its
// own shard only (1/dp of the model under ZeRO), and checkpoints save it exactly like the AdamW
// moments. The inner AdamW state is never touched by a sync.
//
// After every inner step the trainer calls after_inner_step(step):
//   diloco            after steps H, 2H, ...: Delta = phi - theta averaged over islands, an outer SGD
//                     step on phi, theta = phi. One island: the Lookahead optimizer.
//   diloco, delayed   the same, but round r's average runs in the background during round r+1 and
//                     is applied at its end; theta restarts from phi (without round r's update).
//   streaming_diloco  fragment p (strided layers) syncs every H steps, staggered by H/P; its average
//                     overlaps `delay` inner steps, then phi_p steps and
//                     theta_p = mix*theta_p + (1-mix)*phi_p.
//   noloco            after steps H, 2H, ...: each island averages phi and theta - phi with its gossip
//                     group only (no all-reduce), NoLoCo's step on phi, theta = phi.
// With top-k (SparseLoCo), each island sends e + Delta, e its error feedback: e becomes what of
// e + Delta the top-k encoding did not carry (its own decode of what it sent, exactly what the
// others decode), so nothing of a pseudo-gradient is lost, only delayed. With k = every element
// and exact values, e stays 0 and the run is DiLoCo's bit for bit.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/outer/island_average.h"
#include "optim/outer/outer_options.h"
#include "optim/outer/outer_rules.h"
#include "optim/outer/outer_schedule.h"
#include "optim/outer/topk_codec.h"

namespace atl::optim::outer {

// A run of elements in the inner optimizer's coordinates (the concatenation of its value segments).
struct ValueSpan {
  int64_t offset;
  int64_t numel;
};

class OuterOptimizer {
 public:
  // `values`: the inner optimizer's fp32 segments (theta), updated in place by syncs. `fragments`:
  // each fragment's spans, each inside one segment (one fragment unless streaming). phi starts
  // equal to theta, the momentum at zero. `options.algorithm` is one of an outer optimizer (not
  // kNone: std::invalid_argument). `gossip_seed`: NoLoCo's groups are drawn from it and the round.
  OuterOptimizer(const OuterOptions& options, std::vector<at::Tensor> values,
                 std::vector<std::vector<ValueSpan>> fragments, IslandAverage& exchange,
                 uint64_t gossip_seed = 0);
  ~OuterOptimizer();
  OuterOptimizer(const OuterOptimizer&) = delete;
  OuterOptimizer& operator=(const OuterOptimizer&) = delete;

  // The pseudo-gradient norm bound (outer.max_pseudo_grad_norm; DiLoCo and Streaming DiLoCo): an
  // island whose pseudo-gradient -- of the whole island, over the spans `counted` of every rank's
  // values (each element of the model once) -- is longer than `max_norm` is left out of the round's
  // mean. `island_norm`: the L2 norm of pieces of every rank of this island (collective over it).
  void bound_pseudo_gradients(double max_norm, const std::vector<ValueSpan>& counted,
                              std::function<double(const std::vector<at::Tensor>&)> island_norm);
  // The islands left out of the means applied since the last call, for their pseudo-gradient norm.
  std::vector<LeftOut> take_left_out();

  // After `step` inner steps: starts, waits for and applies the syncs due. Returns whether theta
  // changed (the caller then refreshes what derives from it: compute copies, ZeRO gathers).
  bool after_inner_step(int64_t step);

  const at::Tensor& phi() const { return phi_; }
  const at::Tensor& momentum() const { return momentum_; }
  // Top-k only (undefined otherwise): what this island's exchanges have not yet carried.
  const at::Tensor& error_feedback() const { return error_feedback_; }
  // The result of the exchange in flight after the current step, in the optimizer's coordinates
  // (zero outside its fragment), waiting for it; undefined when none is in flight.
  at::Tensor in_flight_result();
  // Resuming after `step` steps, once phi() and momentum() have been loaded in place: `in_flight`
  // is the saved in_flight_result(). Returns false when the schedule has an exchange in flight at
  // `step` but `in_flight` is undefined (the exchange is then dropped).
  bool restore(int64_t step, const at::Tensor& in_flight);

  // Islands with a membership per round: an exchange runs on its round's group, so the one this
  // island started in the background must end before the next round's group replaces it.
  // finish_in_flight() waits for it (rethrowing RoundFailed when its round did not count) and
  // returns whether there was one this island started; rerun_in_flight() runs the same exchange
  // again, synchronously, over the group now in place (the round met again among those left).
  bool finish_in_flight();
  void rerun_in_flight();
  // Whether an exchange this island started has not been applied yet (delayed DiLoCo's round after
  // its boundary).
  bool own_exchange_pending() const { return pending_ && pending_->sent.defined(); }
  // Whether this island's exchange failed (RoundFailed) and waits to be rerun.
  bool exchange_failed() const {
    return own_exchange_pending() && !pending_->ready.defined() && !pending_->mean.valid();
  }
  // Applies a pending result due after `step`; returns whether there was one.
  bool apply_due(int64_t step);
  // Drops the exchange in flight: this island sat out the round met again to rerun it.
  void drop_in_flight() { pending_.reset(); }
  // What an island catching up at the sync after step `step` takes besides phi and the momentum:
  // the result of the exchange in flight after step - 1 steps (applied after `step`, or later), in
  // the optimizer's coordinates; zeros when this island does not hold it, undefined when the
  // schedule has none in flight then. take_in_flight() adopts another island's.
  at::Tensor in_flight_before(int64_t step);
  void take_in_flight(int64_t step, const at::Tensor& in_flight);
  // An island catching up starts without error feedback of its own (SparseLoCo): it has sent nothing
  // the others have not.
  void clear_error_feedback();
  // Starts the outer state afresh from theta (phi = theta, momentum and error feedback 0): a
  // checkpoint without one.
  void reset_from_values();

  // theta as one tensor in the optimizer's coordinates, and writing one back (evaluating phi).
  at::Tensor values_copy() const;
  void write_values(const at::Tensor& flat);

  // Seconds the caller blocked on exchanges (a synchronous sync, or waiting for one in flight).
  double wait_seconds() const { return wait_seconds_; }

 private:
  struct Pending {
    int fragment;
    int64_t applied_after;
    std::future<at::Tensor> mean;
    at::Tensor ready;  // the mean once waited for
    // What this island sent, to run the exchange again (undefined: the result came from a
    // checkpoint or another island).
    at::Tensor sent;
    double norm = 0.0;
  };
  // The L2 norm over the island of this fragment's pseudo-gradient `delta` (0 without a bound).
  double island_norm(int fragment, const at::Tensor& delta) const;
  // In-place views of a fragment's spans: in an outer-state tensor (phi, momentum), or in theta.
  std::vector<at::Tensor> state_views(const at::Tensor& flat, int fragment) const;
  std::vector<at::Tensor> theta_views(int fragment) const;
  // The views' elements as one tensor, and back.
  at::Tensor gather(const std::vector<at::Tensor>& views) const;
  static void scatter(const std::vector<at::Tensor>& views, const at::Tensor& packed);
  void apply_mean(int fragment, const at::Tensor& mean_delta);
  void noloco_sync(int64_t step);
  at::Tensor wait_pending();
  // Top-k: `delta` plus the fragment's error feedback (what the island sends); the feedback keeps
  // what of it the encoding leaves out. Without top-k, `delta` itself.
  at::Tensor with_error_feedback(int fragment, const at::Tensor& delta);

  OuterOptions options_;
  uint64_t gossip_seed_;
  TopkEncoding topk_;  // options_.topk_encoding()
  SyncSchedule schedule_;
  std::vector<at::Tensor> values_;
  std::vector<int64_t> value_offsets_;
  std::vector<std::vector<ValueSpan>> fragments_;
  IslandAverage& exchange_;
  at::Tensor phi_, momentum_, error_feedback_;
  std::optional<Pending> pending_;
  double wait_seconds_ = 0.0;
  at::Tensor counted_;  // 1 where an element counts towards the island's norm; undefined: no bound
  std::function<double(const std::vector<at::Tensor>&)> island_norm_;
  std::vector<LeftOut> left_out_;
};

}  // namespace atl::optim::outer
