#include "optim/outer/outer_optimizer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

namespace atl::optim::outer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

OuterOptimizer::OuterOptimizer(const OuterOptions& options, std::vector<at::Tensor> values,
                               std::vector<std::vector<ValueSpan>> fragments, IslandAverage& exchange,
                               uint64_t gossip_seed)
    : options_(options),
      gossip_seed_(gossip_seed),
      topk_(options.topk_encoding()),
      schedule_(options.schedule()),
      values_(std::move(values)),
      fragments_(std::move(fragments)),
      exchange_(exchange) {
  if (options_.algorithm == Algorithm::kNone)
    throw std::invalid_argument("outer optimizer: algorithm none has no outer optimizer");
  int64_t total = 0;
  for (const at::Tensor& v : values_) {
    value_offsets_.push_back(total);
    total += v.numel();
  }
  if (static_cast<int>(fragments_.size()) != schedule_.fragments)
    throw std::logic_error("outer optimizer: " + std::to_string(fragments_.size()) +
                           " fragments for a schedule of " + std::to_string(schedule_.fragments));
  // Beside the values they follow (the rank's GPU on CUDA runs).
  const auto fp32 =
      at::TensorOptions().dtype(at::kFloat).device(values_.empty() ? c10::kCPU : values_.front().device());
  phi_ = at::empty({total}, fp32);
  momentum_ = at::zeros({total}, fp32);
  if (topk_.enabled()) error_feedback_ = at::zeros({total}, fp32);
  reset_from_values();
}

OuterOptimizer::~OuterOptimizer() {
  // A background exchange must not outlive the tensors and communicator it uses.
  if (pending_ && pending_->mean.valid()) pending_->mean.wait();
}

at::Tensor OuterOptimizer::values_copy() const {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& v : values_) flat.push_back(v.view({-1}));
  return at::cat(flat);
}

void OuterOptimizer::write_values(const at::Tensor& flat) {
  for (size_t s = 0; s < values_.size(); ++s)
    values_[s].view({-1}).copy_(flat.narrow(0, value_offsets_[s], values_[s].numel()));
}

void OuterOptimizer::reset_from_values() {
  phi_.copy_(values_copy());
  momentum_.zero_();
  if (error_feedback_.defined()) error_feedback_.zero_();
}

at::Tensor OuterOptimizer::with_error_feedback(int fragment, const at::Tensor& delta) {
  if (!error_feedback_.defined()) return delta;
  const std::vector<at::Tensor> feedback = state_views(error_feedback_, fragment);
  const at::Tensor sent = gather(feedback).add_(delta);
  // The same deterministic encoding the exchange applies: what the others will decode of it.
  const at::Tensor carried = sent.numel() == 0 ? sent : decode(topk_, encode(topk_, sent), sent.numel());
  scatter(feedback, sent - carried);
  return sent;
}

std::vector<at::Tensor> OuterOptimizer::state_views(const at::Tensor& flat, int fragment) const {
  std::vector<at::Tensor> views;
  for (const ValueSpan& span : fragments_[static_cast<size_t>(fragment)])
    views.push_back(flat.narrow(0, span.offset, span.numel));
  return views;
}

std::vector<at::Tensor> OuterOptimizer::theta_views(int fragment) const {
  std::vector<at::Tensor> views;
  for (const ValueSpan& span : fragments_[static_cast<size_t>(fragment)]) {
    // The segment holding the span: the last one starting at or before it.
    const size_t s =
        static_cast<size_t>(std::upper_bound(value_offsets_.begin(), value_offsets_.end(), span.offset) -
                            value_offsets_.begin() - 1);
    views.push_back(values_[s].view({-1}).narrow(0, span.offset - value_offsets_[s], span.numel));
  }
  return views;
}

at::Tensor OuterOptimizer::gather(const std::vector<at::Tensor>& views) const {
  // A pipeline stage may hold nothing of a fragment (Streaming DiLoCo's strided layers).
  return views.empty() ? at::empty({0}, phi_.options()) : at::cat(views);
}

void OuterOptimizer::scatter(const std::vector<at::Tensor>& views, const at::Tensor& packed) {
  int64_t at = 0;
  for (const at::Tensor& view : views) {
    view.copy_(packed.narrow(0, at, view.numel()));
    at += view.numel();
  }
}

void OuterOptimizer::apply_mean(int fragment, const at::Tensor& mean_delta) {
  at::Tensor phi = gather(state_views(phi_, fragment)), momentum = gather(state_views(momentum_, fragment));
  outer_sgd_step(phi, momentum, mean_delta, options_.sgd());
  scatter(state_views(phi_, fragment), phi);
  scatter(state_views(momentum_, fragment), momentum);
  // Delayed DiLoCo restarted theta when the exchange began; the others take phi now (streaming
  // mixes in its local progress since the exchange began).
  if (options_.delayed) return;
  const double mix = options_.algorithm == Algorithm::kStreamingDiLoCo ? options_.mix : 0.0;
  const std::vector<at::Tensor> theta = theta_views(fragment);
  scatter(theta, mix == 0.0 ? phi : gather(theta).mul_(mix).add_(phi, 1.0 - mix));
}

at::Tensor OuterOptimizer::wait_pending() {
  if (!pending_->ready.defined()) {
    const auto start = Clock::now();
    pending_->ready = pending_->mean.get();
    wait_seconds_ += seconds_since(start);
    // The exchange's thread is done with it: its left-out islands are this mean's.
    const std::vector<LeftOut>& out = exchange_.left_out();
    left_out_.insert(left_out_.end(), out.begin(), out.end());
  }
  return pending_->ready;
}

void OuterOptimizer::bound_pseudo_gradients(
    double max_norm, const std::vector<ValueSpan>& counted,
    std::function<double(const std::vector<at::Tensor>&)> island_norm) {
  if (max_norm <= 0.0) return;
  counted_ = at::zeros_like(phi_);
  for (const ValueSpan& span : counted) counted_.narrow(0, span.offset, span.numel).fill_(1.0);
  island_norm_ = std::move(island_norm);
  exchange_.bound_norms(max_norm);
}

std::vector<LeftOut> OuterOptimizer::take_left_out() {
  return std::exchange(left_out_, {});
}

double OuterOptimizer::island_norm(int fragment, const at::Tensor& delta) const {
  if (!counted_.defined()) return 0.0;
  // Every rank of the island calls this at the same step (the schedule is the island's).
  return island_norm_({delta * gather(state_views(counted_, fragment))});
}

void OuterOptimizer::noloco_sync(int64_t step) {
  const int64_t round = step / schedule_.inner_steps;
  const int me = exchange_.island();
  // The groups are drawn among the islands that contribute (all of them but an elastic round's
  // joiners, which take a member's state after the round), the same list on every one of them. A
  // joiner averages with itself alone: no bytes, but the round's checks and settlement with the others.
  const std::vector<int> contributors = exchange_.contributors();
  const bool contributes = std::binary_search(contributors.begin(), contributors.end(), me);
  std::vector<int> members{me};
  for (const std::vector<int>& group :
       gossip_groups(static_cast<int>(contributors.size()), options_.group_size, gossip_seed_, round)) {
    std::vector<int> islands;
    for (int index : group) islands.push_back(contributors[static_cast<size_t>(index)]);
    if (contributes && std::find(islands.begin(), islands.end(), me) != islands.end()) members = islands;
  }
  std::sort(members.begin(), members.end());  // every member sums in the same order
  at::Tensor phi = gather(state_views(phi_, 0)), delta = gather(state_views(momentum_, 0));
  const at::Tensor progress = gather(theta_views(0)) - phi;
  const auto start = Clock::now();
  const std::vector<at::Tensor> means = exchange_.group_average({phi, progress}, members);
  wait_seconds_ += seconds_since(start);
  if (!contributes) return;
  noloco_step(phi, delta, means[0], means[1], options_.noloco());
  scatter(state_views(phi_, 0), phi);
  scatter(state_views(momentum_, 0), delta);
  scatter(theta_views(0), phi);
}

bool OuterOptimizer::after_inner_step(int64_t step) {
  // One island runs the same rule over its own pseudo-gradient: the Lookahead optimizer (Zhang et
  // al. 2019; DiLoCo with M = 1), whose phi moves like any other island count's.
  const std::optional<int> starting = fragment_starting_after(schedule_, step);
  if (options_.algorithm == Algorithm::kNoLoCo) {
    if (starting) noloco_sync(step);
    return starting.has_value();
  }
  bool changed = false;
  // The new pseudo-gradient is taken before a delayed result lands on the same step.
  at::Tensor delta;
  if (starting) delta = gather(state_views(phi_, *starting)) - gather(theta_views(*starting));
  if (apply_due(step)) changed = true;
  if (!starting) return changed;
  // The norm bound judges the island's own pseudo-gradient, not what feedback adds to it.
  const double norm = island_norm(*starting, delta);
  delta = with_error_feedback(*starting, delta);
  if (schedule_.delay == 0) {
    // Pending until it counts: a round met again reruns what was sent (SparseLoCo's error feedback
    // already holds what that left out, and must not take it twice).
    pending_ = Pending{*starting, step, {}, {}, delta, norm};
    rerun_in_flight();
    return apply_due(step);
  }
  if (options_.delayed) {
    scatter(theta_views(*starting), gather(state_views(phi_, *starting)));
    changed = true;
  }
  // The exchange runs on its own thread over the island group, which nothing else uses meanwhile.
  pending_ = Pending{*starting,
                     step + schedule_.delay,
                     std::async(std::launch::async,
                                [this, delta, norm, fragment = *starting] {
                                  return exchange_.average(delta, norm, fragment);
                                }),
                     {},
                     delta,
                     norm};
  return changed;
}

at::Tensor OuterOptimizer::in_flight_result() {
  if (!pending_) return {};
  at::Tensor full = at::zeros_like(phi_);
  scatter(state_views(full, pending_->fragment), wait_pending());
  return full;
}

bool OuterOptimizer::restore(int64_t step, const at::Tensor& in_flight) {
  if (pending_ && pending_->mean.valid()) pending_->mean.wait();
  pending_.reset();
  const std::optional<InFlight> flight =
      options_.algorithm == Algorithm::kNoLoCo ? std::nullopt : in_flight_after(schedule_, step);
  if (!flight) return true;
  if (!in_flight.defined()) return false;
  pending_ = Pending{
      flight->fragment, flight->applied_after, {}, gather(state_views(in_flight, flight->fragment)), {}, 0.0};
  return true;
}

bool OuterOptimizer::apply_due(int64_t step) {
  if (!pending_ || pending_->applied_after != step) return false;
  apply_mean(pending_->fragment, wait_pending());
  pending_.reset();
  return true;
}

bool OuterOptimizer::finish_in_flight() {
  if (!pending_ || !pending_->sent.defined()) return false;
  wait_pending();
  return true;
}

void OuterOptimizer::rerun_in_flight() {
  if (!pending_ || !pending_->sent.defined())
    throw std::logic_error("rerun_in_flight: no exchange of this island");
  const auto start = Clock::now();
  pending_->ready = exchange_.average(pending_->sent, pending_->norm, pending_->fragment);
  wait_seconds_ += seconds_since(start);
  left_out_.insert(left_out_.end(), exchange_.left_out().begin(), exchange_.left_out().end());
}

at::Tensor OuterOptimizer::in_flight_before(int64_t step) {
  const std::optional<InFlight> flight =
      options_.algorithm == Algorithm::kNoLoCo ? std::nullopt : in_flight_after(schedule_, step - 1);
  if (!flight) return {};
  if (pending_ && pending_->applied_after == flight->applied_after && pending_->fragment == flight->fragment)
    return in_flight_result();
  return at::zeros_like(phi_);
}

void OuterOptimizer::take_in_flight(int64_t step, const at::Tensor& in_flight) {
  restore(step - 1, in_flight);
}

void OuterOptimizer::clear_error_feedback() {
  if (error_feedback_.defined()) error_feedback_.zero_();
}

}  // namespace atl::optim::outer
