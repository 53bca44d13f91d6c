#include "runtime/island_steps.h"

#include <chrono>
#include <stdexcept>
#include <string>

namespace atl::runtime {

int IslandSteps::after_inner_step(int64_t step) {
  if (!layout_.rounds || step % layout_.rounds->inner_steps() != 0) {
    outer_syncs(step);
    return 0;
  }
  return outer_round(step / layout_.rounds->inner_steps());
}

void IslandSteps::outer_syncs(int64_t step) {
  layout_.outer->after_inner_step(step);
  for (const optim::outer::IslandExchange::LeftOut& out : layout_.outer->take_left_out())
    log_.pseudo_gradient_left_out(step, out.island, out.norm);
}

int IslandSteps::outer_round(int64_t round) {
  settle_in_flight(round - 1);
  const int64_t boundary = round * layout_.rounds->inner_steps();
  optim::outer::OuterOptimizer& outer = *layout_.outer;
  return meet_until_counted(round, 0, [&] {
    // Met again after the exchange failed: the same exchange again, not a new pseudo-gradient.
    if (outer.exchange_failed()) {
      outer.rerun_in_flight();
      outer.apply_due(boundary);
    } else {
      outer_syncs(boundary);
    }
    layout_.rounds->hand_over(*layout_.mesh, outer);
    return !outer.own_exchange_pending();
  });
}

void IslandSteps::settle_in_flight(int64_t round) {
  optim::outer::OuterOptimizer& outer = *layout_.outer;
  try {
    if (!outer.finish_in_flight()) return;
    layout_.rounds->completed(round);
    return;
  } catch (const optim::outer::RoundFailed& e) {
    log_.line("outer round " + std::to_string(round) + ": " + e.what() + "; meeting again (attempt 2)");
  }
  const int members = meet_until_counted(round, 1, [&] {
    outer.rerun_in_flight();
    return true;
  });
  if (members == 0) outer.drop_in_flight();  // the others' result reaches it when it catches up
}

int IslandSteps::meet_until_counted(int64_t round, int attempt, const std::function<bool()>& exchange) {
  constexpr int kAttempts = 10;
  ParallelLayout& l = layout_;
  const int64_t boundary = round * l.rounds->inner_steps();
  const int island = l.mesh->coord().island;
  for (; attempt < kAttempts; ++attempt) {
    try {
      const MetRound met = l.rounds->meet(round, attempt, *l.mesh, *l.outer, *l.island_exchange);
      for (int joined : met.joined) log_.island_event(boundary, "island_joined", joined);
      for (int dropped : met.dropped) log_.island_event(boundary, "island_dropped", dropped);
      if (!met.member) {
        log_.island_event(boundary, "sat_out", island);
        return 0;
      }
      if (met.caught_up) log_.island_event(boundary, "caught_up", island);
      if (exchange()) l.rounds->completed(round);
      return static_cast<int>(met.islands.size());
    } catch (const optim::outer::RoundFailed& e) {
      log_.line("outer round " + std::to_string(round) + ": " + e.what() + "; meeting again (attempt " +
                std::to_string(attempt + 2) + ")");
    }
  }
  throw std::runtime_error("outer round " + std::to_string(round) + " failed " + std::to_string(kAttempts) +
                           " times in a row; check the islands' links and logs, then resume");
}

std::optional<int64_t> IslandSteps::catch_up(int64_t step) {
  if (!layout_.rounds) return std::nullopt;
  const std::optional<int64_t> first = layout_.rounds->round_to_catch_up(step);
  if (!first) return std::nullopt;
  log_.line("islands: the others are past this island's step " + std::to_string(step) + "; meeting round " +
            std::to_string(*first) + " to take their state");
  // A round that closed just before this island arrived is followed by the next.
  constexpr int kRounds = 3;
  for (int64_t round = *first; round < *first + kRounds; ++round) {
    if (outer_round(round) == 0) continue;
    layout_.data_parallel->after_optimizer_step();  // compute copies and ZeRO gathers of the new theta
    return round * layout_.rounds->inner_steps();
  }
  throw std::runtime_error("islands: rounds " + std::to_string(*first) + " to " +
                           std::to_string(*first + kRounds - 1) +
                           " closed before this island arrived; check its link to outer.rendezvous");
}

double IslandSteps::average_gradients() {
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor& grads = layout_.data_parallel->optimizer_grads();
  grads.copy_(layout_.island_exchange->mean(grads));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double IslandSteps::on_phi(const std::function<double()>& evaluate) {
  ParallelLayout& l = layout_;
  if (!l.outer) throw std::logic_error("evaluate_outer: outer.algorithm is none");
  const at::Tensor theta = l.outer->values_copy();
  l.outer->write_values(l.outer->phi());
  l.data_parallel->after_optimizer_step();  // compute copies and ZeRO gathers of phi
  const double loss = evaluate();
  l.outer->write_values(theta);
  l.data_parallel->after_optimizer_step();
  return loss;
}

std::optional<IslandValidation> IslandSteps::validation(double val_loss,
                                                        const std::function<double()>& evaluate) {
  if (!layout_.outer) return std::nullopt;
  const comm::DeviceMesh& mesh = *layout_.mesh;
  return IslandValidation{
      mesh.coord().island,
      layout_.rounds ? std::vector<double>{} : comm::all_gather_value(mesh.island(), val_loss),
      on_phi(evaluate)};
}

}  // namespace atl::runtime
