#include "optim/outer/sliced_average.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>

namespace atl::optim::outer {
namespace {

void wait(const comm::WorkPtr& work) {
  work->wait();
}

at::Tensor as_tensor(const std::vector<int64_t>& values) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong));
}

// One message per peer: its parts concatenated in piece order.
std::map<int, at::Tensor> concatenated(const std::map<int, std::vector<at::Tensor>>& parts) {
  std::map<int, at::Tensor> out;
  for (const auto& [peer, pieces] : parts) out[peer] = at::cat(pieces);
  return out;
}

// Reads a peer's message piece by piece, in the order its sender appended them.
class Cursor {
 public:
  explicit Cursor(const std::map<int, at::Tensor>& messages) : messages_(messages) {}
  at::Tensor next(int peer, int64_t bytes) {
    int64_t& at = read_[peer];
    at::Tensor out = messages_.at(peer).narrow(0, at, bytes);
    at += bytes;
    return out;
  }

 private:
  const std::map<int, at::Tensor>& messages_;
  std::map<int, int64_t> read_;
};

}  // namespace

SlicedIslandAverage::SlicedIslandAverage(comm::Communicator& island_ranks, comm::Communicator& everyone,
                                         std::vector<int> ranks_per_island, Codec codec,
                                         std::vector<CanonicalFragment> fragments)
    : island_ranks_(island_ranks),
      everyone_(everyone),
      ranks_per_island_(std::move(ranks_per_island)),
      codec_(codec),
      fragments_(std::move(fragments)) {
  // Each island's first rank in `everyone`.
  offsets_.assign(ranks_per_island_.size(), 0);
  for (size_t i = 1; i < offsets_.size(); ++i) offsets_[i] = offsets_[i - 1] + ranks_per_island_[i - 1];
  island_ = island_of(everyone_.rank());
  if (everyone_.size() != offsets_.back() + ranks_per_island_.back() ||
      island_ranks_.size() != ranks_per_island_[static_cast<size_t>(island_)] ||
      everyone_.rank() != global_rank(island_, island_ranks_.rank()))
    throw std::logic_error(
        "sliced island average: the group of every island's ranks does not list this "
        "island's ranks in island order");
  for (const CanonicalFragment& fragment : fragments_)
    placements_.push_back(canonical_placement(fragment, island_ranks_.size() == 1));
  for (size_t f = 0; f < fragments_.size(); ++f) {
    // Each slice element must arrive from exactly one rank of the island.
    const Cut& c = cut(static_cast<int>(f), SliceGrid::kIslandChunks);
    at::Tensor arrivals = at::zeros({c.slice_numel}, at::kInt);
    for (const at::Tensor& slice_at : c.gather.slice_at)
      arrivals.index_put_({slice_at}, at::ones({}, at::kInt), /*accumulate=*/true);
    at::Tensor wrong = at::full({1}, arrivals.ne(1).sum().item<int64_t>(), at::kLong);
    wait(island_ranks_.all_reduce(wrong, comm::ReduceOp::kSum));
    if (wrong.item<int64_t>() > 0)
      throw std::logic_error("canonical island average: " + std::to_string(wrong.item<int64_t>()) +
                             " of the " + std::to_string(fragments_[f].numel) +
                             " canonical elements of fragment " + std::to_string(f) +
                             " are not owned by exactly one rank of the island");
  }
}

void SlicedIslandAverage::authenticate(ExchangeAuthentication authentication) {
  if (!authentication.authenticator)
    throw std::invalid_argument("SlicedIslandAverage::authenticate: no authenticator");
  authentication_ = std::move(authentication);
}

int SlicedIslandAverage::island_of(int global_rank) const {
  return static_cast<int>(std::upper_bound(offsets_.begin(), offsets_.end(), global_rank) -
                          offsets_.begin()) -
         1;
}

const SlicedIslandAverage::Cut& SlicedIslandAverage::cut(int fragment, SliceGrid grid) {
  const auto key = std::make_pair(fragment, static_cast<int>(grid));
  if (auto found = cuts_.find(key); found != cuts_.end()) return found->second;
  const int64_t numel = fragments_.at(static_cast<size_t>(fragment)).numel;
  const int me = island_ranks_.rank();
  const std::vector<int64_t> bounds = slice_bounds(numel, island_ranks_.size(), islands(), grid);
  Cut c;
  c.slice_offset = bounds[static_cast<size_t>(me)];
  c.slice_numel = bounds[static_cast<size_t>(me) + 1] - c.slice_offset;
  for (CanonicalPiece& piece : canonical_pieces(numel, ranks_per_island_, grid))
    if (piece.owner[static_cast<size_t>(island_)] == me) c.pieces.push_back(std::move(piece));
  const CanonicalPlacement& p = placements_.at(static_cast<size_t>(fragment));
  c.gather = route(p.owned_at, p.owned_index, bounds, c.slice_offset);
  c.scatter = route(p.placed_at, p.placed_index, bounds, c.slice_offset);
  return cuts_.emplace(key, std::move(c)).first->second;
}

SlicedIslandAverage::Route SlicedIslandAverage::route(const at::Tensor& at, const at::Tensor& index,
                                                      const std::vector<int64_t>& bounds,
                                                      int64_t slice_offset) {
  const int ranks = island_ranks_.size(), me = island_ranks_.rank();
  // The rank whose slice holds each element: the last bound at or below its index.
  const at::Tensor holder =
      at::searchsorted(as_tensor(bounds), index, /*out_int32=*/false, /*right=*/true) - 1;
  Route r;
  std::vector<at::Tensor> indices;
  at::Tensor counts = at::zeros({ranks}, at::kLong);
  for (int q = 0; q < ranks; ++q) {
    const at::Tensor mine = holder.eq(q);
    r.at.push_back(at.masked_select(mine));
    indices.push_back(index.masked_select(mine));
    counts[q] = indices.back().numel();
  }
  // counts_of[q * ranks + s]: how many elements rank q sends to rank s.
  at::Tensor counts_of = at::zeros({ranks * ranks}, at::kLong);
  wait(island_ranks_.all_gather(counts, counts_of));
  std::vector<comm::P2POp> ops;
  r.slice_at.resize(static_cast<size_t>(ranks));
  for (int q = 0; q < ranks; ++q) {
    if (q == me) {
      r.slice_at[static_cast<size_t>(q)] = indices[static_cast<size_t>(q)] - slice_offset;
      continue;
    }
    if (indices[static_cast<size_t>(q)].numel() > 0)
      ops.push_back({comm::P2POp::Kind::kSend, indices[static_cast<size_t>(q)], q, 0});
    const int64_t incoming = counts_of[q * ranks + me].item<int64_t>();
    r.slice_at[static_cast<size_t>(q)] = at::empty({incoming}, at::kLong);
    if (incoming > 0) ops.push_back({comm::P2POp::Kind::kRecv, r.slice_at[static_cast<size_t>(q)], q, 0});
  }
  if (!ops.empty()) wait(island_ranks_.batch_p2p(ops));
  for (int q = 0; q < ranks; ++q)
    if (q != me) r.slice_at[static_cast<size_t>(q)].sub_(slice_offset);
  return r;
}

void SlicedIslandAverage::move_in_island(const Route& r, bool to_slices, const at::Tensor& source,
                                         at::Tensor& target, int tag) {
  const std::vector<at::Tensor>& from = to_slices ? r.at : r.slice_at;
  const std::vector<at::Tensor>& to = to_slices ? r.slice_at : r.at;
  const int ranks = island_ranks_.size(), me = island_ranks_.rank();
  target.index_put_({to[static_cast<size_t>(me)]}, source.index_select(0, from[static_cast<size_t>(me)]));
  // One peer pair at a time (to the rank d ahead, from the rank d behind): only a pair's share of
  // the elements is in flight at once, not the whole slice twice over.
  for (int d = 1; d < ranks; ++d) {
    const size_t ahead = static_cast<size_t>((me + d) % ranks),
                 behind = static_cast<size_t>((me - d + ranks) % ranks);
    std::vector<comm::P2POp> ops;
    if (from[ahead].numel() > 0)
      ops.push_back(
          {comm::P2POp::Kind::kSend, source.index_select(0, from[ahead]), static_cast<int>(ahead), tag});
    const at::Tensor received = at::empty({to[behind].numel()}, at::kFloat);
    if (received.numel() > 0)
      ops.push_back({comm::P2POp::Kind::kRecv, received, static_cast<int>(behind), tag});
    if (ops.empty()) continue;
    wait(island_ranks_.batch_p2p(ops));
    target.index_put_({to[behind]}, received);
  }
}

at::Tensor SlicedIslandAverage::gathered(const at::Tensor& values, const Cut& c) {
  at::Tensor slice = at::zeros({c.slice_numel}, at::kFloat);
  move_in_island(c.gather, /*to_slices=*/true, values.to(at::kCPU, at::kFloat), slice, 1);
  return slice;
}

at::Tensor SlicedIslandAverage::scattered(const at::Tensor& values, const at::Tensor& slice_mean,
                                          const Cut& c, int fragment) {
  if (placements_.at(static_cast<size_t>(fragment)).identity) return slice_mean.to(values.device());
  at::Tensor out = values.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  move_in_island(c.scatter, /*to_slices=*/false, slice_mean, out, 2);
  return out.to(values.device());
}

std::map<int, at::Tensor> SlicedIslandAverage::swap(const std::map<int, at::Tensor>& outgoing,
                                                    const std::map<int, int64_t>& incoming_bytes, int attempt,
                                                    int phase, std::vector<int>& rejected_here) {
  const int me = everyone_.rank();
  const auto context = [&](int sender, int receiver) {
    return authentication_ ? chunk_context(*authentication_, exchanges_, attempt, phase, sender, receiver)
                           : "";
  };
  std::vector<comm::P2POp> ops;
  for (const auto& [peer, payload] : outgoing) {
    at::Tensor message = tagged(authentication_, payload, context(me, peer));
    if (attempt == 0 && exchanges_ == corruption_.exchange && island_ == corruption_.island) {
      message = message.clone();  // the sender's own copy stays intact, as on a real link
      message.data_ptr<uint8_t>()[0] ^= 0x01;
      corruption_.exchange = -1;  // the first message only
    }
    ops.push_back({comm::P2POp::Kind::kSend, message, peer, phase});
    bytes_sent_ += static_cast<uint64_t>(message.numel());
    average_data_bytes_ += static_cast<uint64_t>(message.numel());
  }
  std::map<int, at::Tensor> received;
  for (const auto& [peer, bytes] : incoming_bytes) {
    received[peer] = at::empty({bytes + tag_bytes(authentication_)}, at::kByte);
    ops.push_back({comm::P2POp::Kind::kRecv, received[peer], peer, phase});
  }
  if (!ops.empty()) wait(everyone_.batch_p2p(ops));
  for (const auto& [peer, bytes] : incoming_bytes)
    if (!authentic(authentication_, received[peer], bytes, context(peer, me)))
      rejected_here.push_back(island_of(peer));
  return received;
}

void SlicedIslandAverage::count_agreement(uint64_t nbytes) {
  bytes_sent_ += comm::ring_wire_bytes(nbytes, everyone_.size(), 2);
  island_agreement_bytes_ += comm::ring_wire_bytes(nbytes, islands(), 2);
}

int SlicedIslandAverage::agree_on_rejected(const std::vector<int>& rejected_here) {
  if (!authentication_) return -1;
  at::Tensor failures = at::zeros({islands()}, at::kInt);
  for (int sender : rejected_here) {
    failures[sender] += 1;
    std::cerr << "atoll: outer exchange: a chunk island " << sender << " sent to island " << island_
              << " failed its HMAC check (altered in flight, or not made with the job's secret); it was not "
                 "averaged in\n";
  }
  wait(everyone_.all_reduce(failures, comm::ReduceOp::kSum));
  count_agreement(failures.nbytes());
  return most_rejected(failures);
}

void SlicedIslandAverage::throw_unless_all_finite(const at::Tensor& slice) {
  const int k = islands();
  const bool finite = at::isfinite(slice).all().item<bool>();
  const at::Tensor vote = at::full({1}, finite ? -1 : k - 1 - island_, at::kInt);
  wait(everyone_.all_reduce(vote, comm::ReduceOp::kMax));
  count_agreement(vote.nbytes());
  if (vote.item<int>() >= 0) throw_diverged(k - 1 - vote.item<int>());
}

void SlicedIslandAverage::agree_on_left_out(double norm) {
  left_out_.clear();
  if (max_norm_ <= 0.0) return;
  at::Tensor norms = at::zeros({islands()}, at::kDouble);
  if (island_ranks_.rank() == 0) norms[island_] = norm;
  wait(everyone_.all_reduce(norms, comm::ReduceOp::kSum));
  count_agreement(norms.nbytes());
  for (int j = 0; j < islands(); ++j)
    if (norms[j].item<double>() > max_norm_) left_out_.push_back({j, norms[j].item<double>()});
}

void SlicedIslandAverage::report_island_bytes() {
  if (!report_) return;
  at::Tensor data = at::full({1}, static_cast<int64_t>(average_data_bytes_), at::kLong);
  wait(island_ranks_.all_reduce(data, comm::ReduceOp::kSum));
  report_(static_cast<uint64_t>(data.item<int64_t>()) + island_agreement_bytes_);
}

at::Tensor SlicedIslandAverage::average(const at::Tensor& values, double norm, int fragment) {
  const Cut& c = cut(fragment, SliceGrid::kIslandChunks);
  average_data_bytes_ = 0;
  island_agreement_bytes_ = 0;
  at::Tensor slice = gathered(values, c);
  left_out_.clear();
  if (islands() > 1) {
    throw_unless_all_finite(slice);
    agree_on_left_out(norm);
    // An island left out sends zeros, so the sums hold the others' values only.
    if (std::any_of(left_out_.begin(), left_out_.end(),
                    [&](const LeftOut& l) { return l.island == island_; }))
      slice.zero_();
    const int divisor = std::max(1, islands() - static_cast<int>(left_out_.size()));
    slice = retried_until_authentic<at::Tensor>(
        exchanges_, everyone_.rank() == 0,
        [&](int attempt, int& rejected) { return try_mean(slice, c, divisor, attempt, rejected); });
    report_island_bytes();
  }
  return scattered(values, slice, c, fragment);
}

std::optional<at::Tensor> SlicedIslandAverage::try_mean(const at::Tensor& slice, const Cut& c, int divisor,
                                                        int attempt, int& rejected) {
  const auto local = [&](const at::Tensor& t, const CanonicalPiece& p) {
    return t.narrow(0, p.offset - c.slice_offset, p.numel);
  };
  const auto owner = [&](const CanonicalPiece& p, int island) {
    return global_rank(island, p.owner[static_cast<size_t>(island)]);
  };
  // 1. Reduce-scatter: each piece's owner in the island whose chunk holds it receives the piece
  // from its owners in every other island.
  std::map<int, std::vector<at::Tensor>> parts;
  std::map<int, int64_t> incoming;
  for (const CanonicalPiece& p : c.pieces) {
    if (p.reducer != island_) {
      parts[owner(p, p.reducer)].push_back(encode(codec_, local(slice, p)));
      continue;
    }
    for (int i = 0; i < islands(); ++i)
      if (i != island_) incoming[owner(p, i)] += encoded_bytes(codec_, p.numel);
  }
  std::vector<int> rejected_here;
  const std::map<int, at::Tensor> received = swap(concatenated(parts), incoming, attempt, 1, rejected_here);
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;

  // Sums in island order of the decoded pieces (its own too), each mean encoded once: the bytes every
  // island decodes, this one included.
  at::Tensor mean = at::empty({c.slice_numel}, at::kFloat);
  Cursor from_islands(received);
  parts.clear();
  incoming.clear();
  for (const CanonicalPiece& p : c.pieces) {
    const int64_t bytes = encoded_bytes(codec_, p.numel);
    if (p.reducer != island_) {
      incoming[owner(p, p.reducer)] += bytes;
      continue;
    }
    at::Tensor sum = at::zeros({p.numel}, at::kFloat);
    for (int i = 0; i < islands(); ++i)
      sum.add_(decode(codec_,
                      i == island_ ? encode(codec_, local(slice, p)) : from_islands.next(owner(p, i), bytes),
                      p.numel));
    sum.div_(divisor);
    const at::Tensor own = encode(codec_, sum);
    local(mean, p).copy_(decode(codec_, own, p.numel));
    for (int i = 0; i < islands(); ++i)
      if (i != island_) parts[owner(p, i)].push_back(own);
  }
  // 2. Every piece's mean from its reducer to its owners in the other islands.
  const std::map<int, at::Tensor> means = swap(concatenated(parts), incoming, attempt, 2, rejected_here);
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;
  Cursor from_reducers(means);
  for (const CanonicalPiece& p : c.pieces)
    if (p.reducer != island_) {
      const int64_t bytes = encoded_bytes(codec_, p.numel);
      local(mean, p).copy_(decode(codec_, from_reducers.next(owner(p, p.reducer), bytes), p.numel));
    }
  return mean;
}

std::vector<at::Tensor> SlicedIslandAverage::group_average(const std::vector<at::Tensor>& tensors,
                                                           const std::vector<int>& members) {
  const Cut& c = cut(0, SliceGrid::kWhole);
  average_data_bytes_ = 0;
  island_agreement_bytes_ = 0;
  std::vector<at::Tensor> slices;
  for (const at::Tensor& t : tensors) slices.push_back(gathered(t, c));
  std::vector<at::Tensor> sums = retried_until_authentic<std::vector<at::Tensor>>(
      exchanges_, everyone_.rank() == 0,
      [&](int attempt, int& rejected) { return try_group_sums(slices, c, members, attempt, rejected); });
  report_island_bytes();
  std::vector<at::Tensor> out;
  for (size_t t = 0; t < tensors.size(); ++t)
    out.push_back(scattered(tensors[t], sums[t].div_(static_cast<double>(members.size())), c, 0));
  return out;
}

std::optional<std::vector<at::Tensor>> SlicedIslandAverage::try_group_sums(
    const std::vector<at::Tensor>& slices, const Cut& c, const std::vector<int>& members, int attempt,
    int& rejected) {
  std::vector<at::Tensor> sums;
  std::vector<int> rejected_here;
  for (size_t t = 0; t < slices.size(); ++t) {
    // Every member's owner of each piece sends it to the other members' owners.
    std::map<int, std::vector<at::Tensor>> parts;
    std::map<int, int64_t> incoming;
    for (const CanonicalPiece& p : c.pieces)
      for (int m : members)
        if (m != island_) {
          const int peer = global_rank(m, p.owner[static_cast<size_t>(m)]);
          parts[peer].push_back(encode(codec_, slices[t].narrow(0, p.offset - c.slice_offset, p.numel)));
          incoming[peer] += encoded_bytes(codec_, p.numel);
        }
    const std::map<int, at::Tensor> received =
        swap(concatenated(parts), incoming, attempt, static_cast<int>(t), rejected_here);
    Cursor from_members(received);
    at::Tensor sum = at::zeros({c.slice_numel}, at::kFloat);
    for (const CanonicalPiece& p : c.pieces) {
      const at::Tensor own = slices[t].narrow(0, p.offset - c.slice_offset, p.numel);
      at::Tensor piece_sum = sum.narrow(0, p.offset - c.slice_offset, p.numel);
      for (int m : members)
        piece_sum.add_(decode(codec_,
                              m == island_
                                  ? encode(codec_, own)
                                  : from_members.next(global_rank(m, p.owner[static_cast<size_t>(m)]),
                                                      encoded_bytes(codec_, p.numel)),
                              p.numel));
    }
    sums.push_back(std::move(sum));
  }
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;
  return sums;
}

}  // namespace atl::optim::outer
