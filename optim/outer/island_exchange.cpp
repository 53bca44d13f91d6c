#include "optim/outer/island_exchange.h"

#include <ATen/ATen.h>

#include <chrono>

namespace atl::optim::outer {

using Clock = std::chrono::steady_clock;

IslandExchange::IslandExchange(comm::Communicator& islands, Codec codec, SimulatedLink link)
    : group_(islands), codec_(codec), link_(link) {}

void IslandExchange::account(Clock::time_point start, uint64_t bytes, int messages) {
  bytes_sent_ += bytes;
  const double simulated = link_.hold_until_delivered(start, bytes, messages);
  simulated_ns_ += static_cast<uint64_t>(simulated * 1e9);
}

void IslandExchange::throw_unless_all_finite(const at::Tensor& values) {
  // Every island votes before anything is encoded, so a diverged island stops them all with one
  // line instead of leaving the others waiting in the exchange. Max of (k-1-island) picks the
  // lowest diverged island.
  const int k = group_.size();
  const bool finite = at::isfinite(values).all().item<bool>();
  const at::Tensor vote =
      at::full({1}, finite ? -1 : k - 1 - group_.rank(), at::TensorOptions().dtype(at::kInt));
  group_.all_reduce(vote, comm::ReduceOp::kMax)->wait();
  bytes_sent_ += comm::ring_wire_bytes(vote.nbytes(), k, 2);
  const int worst = vote.item<int>();
  if (worst >= 0)
    throw std::invalid_argument(
        "outer exchange: island " + std::to_string(k - 1 - worst) +
        " has non-finite values in its pseudo-gradient (its inner training diverged); "
        "lower optim.lr or set optim.grad_clip, and resume from the last checkpoint");
}

// The exchange runs on host copies over the group's MPI plane: islands sit behind links NCCL is not
// made for, and the codecs' bytes are small. On the CPU the copies are the tensors themselves.
at::Tensor IslandExchange::mean(const at::Tensor& values) {
  return mean_on_host(values.cpu()).to(values.device());
}

std::vector<at::Tensor> IslandExchange::group_mean(const std::vector<at::Tensor>& tensors,
                                                   const std::vector<int>& members) {
  std::vector<at::Tensor> host;
  for (const at::Tensor& t : tensors) host.push_back(t.cpu());
  std::vector<at::Tensor> means = group_mean_on_host(host, members);
  for (size_t t = 0; t < means.size(); ++t) means[t] = means[t].to(tensors[t].device());
  return means;
}

at::Tensor IslandExchange::mean_on_host(const at::Tensor& values) {
  const int k = group_.size(), me = group_.rank();
  if (k == 1) return values.clone();
  const auto start = Clock::now();
  throw_unless_all_finite(values);
  const int64_t n = values.numel();
  const comm::ShardRange mine = comm::shard_range(n, k, me);

  // 1. Reduce-scatter: island j receives every island's encoded chunk j.
  std::vector<comm::P2POp> ops;
  std::vector<at::Tensor> received(static_cast<size_t>(k));
  uint64_t sent = 0;
  const int64_t my_chunk_bytes = encoded_bytes(codec_, mine.numel);
  for (int j = 0; j < k; ++j) {
    const comm::ShardRange chunk = comm::shard_range(n, k, j);
    const at::Tensor encoded = encode(codec_, values.narrow(0, chunk.offset, chunk.numel));
    if (j == me) {
      received[static_cast<size_t>(j)] = encoded;
      continue;
    }
    ops.push_back({comm::P2POp::Kind::kSend, encoded, j, 0});
    sent += static_cast<uint64_t>(encoded.numel());
    received[static_cast<size_t>(j)] = at::empty({my_chunk_bytes}, at::TensorOptions().dtype(at::kByte));
    ops.push_back({comm::P2POp::Kind::kRecv, received[static_cast<size_t>(j)], j, 0});
  }
  group_.batch_p2p(ops)->wait();
  at::Tensor sum = at::zeros({mine.numel}, values.options());
  for (int j = 0; j < k; ++j) sum.add_(decode(codec_, received[static_cast<size_t>(j)], mine.numel));
  sum.div_(k);

  // 2. All-gather of the encoded mean chunks, padded to the largest chunk (chunk 0).
  const int64_t slot = encoded_bytes(codec_, comm::shard_range(n, k, 0).numel);
  const at::Tensor gathered = at::zeros({slot * k}, at::TensorOptions().dtype(at::kByte));
  gathered.narrow(0, slot * me, my_chunk_bytes).copy_(encode(codec_, sum));
  group_.all_gather(gathered.narrow(0, slot * me, slot), gathered)->wait();
  sent += static_cast<uint64_t>(slot) * static_cast<uint64_t>(k - 1);

  at::Tensor out = at::empty({n}, values.options());
  for (int j = 0; j < k; ++j) {
    const comm::ShardRange chunk = comm::shard_range(n, k, j);
    out.narrow(0, chunk.offset, chunk.numel)
        .copy_(decode(codec_, gathered.narrow(0, slot * j, encoded_bytes(codec_, chunk.numel)), chunk.numel));
  }
  // The finiteness vote, k-1 messages in the all-to-all, k-1 ring steps in the gather.
  account(start, sent, 2 * k - 1);
  return out;
}

std::vector<at::Tensor> IslandExchange::group_mean_on_host(const std::vector<at::Tensor>& tensors,
                                                           const std::vector<int>& members) {
  const auto start = Clock::now();
  const int me = group_.rank();
  std::vector<comm::P2POp> ops;
  // encoded[t][m]: tensor t of member m (this island's own encoded too: every member decodes the
  // same bytes for every contribution).
  std::vector<std::vector<at::Tensor>> encoded(tensors.size());
  uint64_t sent = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const at::Tensor own = encode(codec_, tensors[t]);
    for (int member : members) {
      if (member == me) {
        encoded[t].push_back(own);
        continue;
      }
      ops.push_back({comm::P2POp::Kind::kSend, own, member, static_cast<int>(t)});
      sent += static_cast<uint64_t>(own.numel());
      encoded[t].push_back(at::empty_like(own));
      ops.push_back({comm::P2POp::Kind::kRecv, encoded[t].back(), member, static_cast<int>(t)});
    }
  }
  if (!ops.empty()) group_.batch_p2p(ops)->wait();
  std::vector<at::Tensor> means;
  for (size_t t = 0; t < tensors.size(); ++t) {
    at::Tensor sum = at::zeros_like(tensors[t]);
    for (const at::Tensor& bytes : encoded[t]) sum.add_(decode(codec_, bytes, tensors[t].numel()));
    means.push_back(sum.div_(static_cast<double>(members.size())));
  }
  account(start, sent, static_cast<int>(members.size()) - 1);
  return means;
}

}  // namespace atl::optim::outer
