#include "optim/outer/canonical_average.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace atl::optim::outer {
namespace {

// How the leader's part of an average ended, as every rank rethrows it.
enum class Outcome : int64_t { kDone = 0, kRoundFailed, kInvalidArgument, kFailed };

void wait(const comm::WorkPtr& work) {
  work->wait();
}

// `text` from rank 0 of `group` on every rank.
std::string broadcast_text(comm::Communicator& group, const std::string& text) {
  at::Tensor length = at::full({1}, static_cast<int64_t>(text.size()), at::kLong);
  wait(group.broadcast(length, 0));
  at::Tensor bytes = at::zeros({length.item<int64_t>()}, at::kByte);
  if (group.rank() == 0 && !text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  wait(group.broadcast(bytes, 0));
  return {static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel())};
}

}  // namespace

CanonicalIslandAverage::CanonicalIslandAverage(comm::Communicator& island_ranks, IslandExchange& exchange,
                                               std::vector<CanonicalFragment> fragments)
    : island_ranks_(island_ranks), exchange_(exchange) {
  // The island's place among the islands: the leader's, for every rank.
  at::Tensor place =
      at::tensor({static_cast<int64_t>(exchange_.islands()), static_cast<int64_t>(exchange_.island())});
  wait(island_ranks_.broadcast(place, 0));
  islands_ = static_cast<int>(place[0].item<int64_t>());
  island_ = static_cast<int>(place[1].item<int64_t>());
  for (size_t f = 0; f < fragments.size(); ++f) {
    const CanonicalFragment& fragment = fragments[f];
    placements_.push_back(canonical_placement(fragment, island_ranks_.size() == 1));
    at::Tensor owners = at::zeros({fragment.numel}, at::kInt);
    owners.index_put_({placements_.back().owned_index}, at::ones({}, at::kInt), /*accumulate=*/true);
    wait(island_ranks_.all_reduce(owners, comm::ReduceOp::kSum));
    const int64_t wrong = owners.ne(1).sum().item<int64_t>();
    if (wrong > 0)
      throw std::logic_error("canonical island average: " + std::to_string(wrong) + " of the " +
                             std::to_string(fragment.numel) + " canonical elements of fragment " +
                             std::to_string(f) + " are not owned by exactly one rank of the island");
  }
}

CanonicalPlacement canonical_placement(const CanonicalFragment& fragment, bool one_rank_island) {
  CanonicalPlacement p;
  p.numel = fragment.numel;
  p.owned_at = fragment.owned.nonzero().view({-1});
  p.owned_index = fragment.index.masked_select(fragment.owned);
  const at::Tensor placed = fragment.index.ge(0);
  p.placed_at = placed.nonzero().view({-1});
  p.placed_index = fragment.index.masked_select(placed);
  p.identity = one_rank_island && fragment.index.numel() == fragment.numel &&
               fragment.owned.all().item<bool>() &&
               fragment.index.equal(at::arange(fragment.numel, fragment.index.options()));
  return p;
}

at::Tensor CanonicalIslandAverage::to_canonical(const at::Tensor& values, int fragment) const {
  const CanonicalPlacement& p = placements_.at(static_cast<size_t>(fragment));
  // A one-rank island's values are its canonical vector: no scatter, no sum over the island.
  if (p.identity) return values.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor canonical = at::zeros({p.numel}, at::kFloat);
  canonical.index_copy_(0, p.owned_index, values.to(at::kCPU).index_select(0, p.owned_at));
  wait(island_ranks_.all_reduce(canonical, comm::ReduceOp::kSum));  // one owner per element: exact
  return canonical;
}

at::Tensor CanonicalIslandAverage::from_canonical(const at::Tensor& values, const at::Tensor& canonical,
                                                  int fragment) const {
  const CanonicalPlacement& p = placements_.at(static_cast<size_t>(fragment));
  if (p.identity) return canonical.to(values.device());
  at::Tensor out = values.to(at::kCPU).clone();
  out.index_copy_(0, p.placed_at, canonical.index_select(0, p.placed_index));
  return out.to(values.device());
}

template <typename Between>
void CanonicalIslandAverage::through_leader(std::vector<at::Tensor>& canonical, Between between_islands) {
  Outcome outcome = Outcome::kDone;
  std::string message;
  if (leader()) {
    try {
      between_islands(canonical);
    } catch (const RoundFailed& e) {
      outcome = Outcome::kRoundFailed, message = e.what();
    } catch (const std::invalid_argument& e) {
      outcome = Outcome::kInvalidArgument, message = e.what();
    } catch (const std::exception& e) {
      outcome = Outcome::kFailed, message = e.what();
    }
  }
  at::Tensor code = at::full({1}, static_cast<int64_t>(outcome), at::kLong);
  wait(island_ranks_.broadcast(code, 0));
  outcome = static_cast<Outcome>(code.item<int64_t>());
  if (outcome != Outcome::kDone) {
    message = broadcast_text(island_ranks_, message);
    if (outcome == Outcome::kRoundFailed) throw RoundFailed(message);
    if (outcome == Outcome::kInvalidArgument) throw std::invalid_argument(message);
    throw std::runtime_error(message);
  }
  for (at::Tensor& tensor : canonical) wait(island_ranks_.broadcast(tensor, 0));
  broadcast_left_out();
}

void CanonicalIslandAverage::broadcast_left_out() {
  at::Tensor count =
      at::full({1}, static_cast<int64_t>(leader() ? exchange_.left_out().size() : 0), at::kLong);
  wait(island_ranks_.broadcast(count, 0));
  at::Tensor islands = at::zeros({count.item<int64_t>()}, at::kLong);
  at::Tensor norms = at::zeros({count.item<int64_t>()}, at::kDouble);
  if (leader())
    for (size_t i = 0; i < exchange_.left_out().size(); ++i) {
      islands[static_cast<int64_t>(i)] = exchange_.left_out()[i].island;
      norms[static_cast<int64_t>(i)] = exchange_.left_out()[i].norm;
    }
  wait(island_ranks_.broadcast(islands, 0));
  wait(island_ranks_.broadcast(norms, 0));
  left_out_.clear();
  for (int64_t i = 0; i < islands.numel(); ++i)
    left_out_.push_back({static_cast<int>(islands[i].item<int64_t>()), norms[i].item<double>()});
}

at::Tensor CanonicalIslandAverage::average(const at::Tensor& values, double norm, int fragment) {
  std::vector<at::Tensor> canonical{to_canonical(values, fragment)};
  through_leader(canonical, [&](std::vector<at::Tensor>& c) { c[0] = exchange_.mean(c[0], norm); });
  return from_canonical(values, canonical[0], fragment);
}

std::vector<at::Tensor> CanonicalIslandAverage::group_average(const std::vector<at::Tensor>& tensors,
                                                              const std::vector<int>& members) {
  std::vector<at::Tensor> canonical;
  for (const at::Tensor& t : tensors) canonical.push_back(to_canonical(t, 0));
  through_leader(canonical, [&](std::vector<at::Tensor>& c) { c = exchange_.group_mean(c, members); });
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) out.push_back(from_canonical(tensors[i], canonical[i], 0));
  return out;
}

}  // namespace atl::optim::outer
