#include "optim/outer/island_exchange.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <numeric>
#include <stdexcept>

namespace atl::optim::outer {

using Clock = std::chrono::steady_clock;

IslandExchange::IslandExchange(comm::Communicator& islands, Codec codec, SimulatedLink link)
    : group_(islands), codec_(codec), link_(link) {}

void IslandExchange::authenticate(ExchangeAuthentication authentication) {
  if (!authentication.authenticator)
    throw std::invalid_argument("IslandExchange::authenticate: no authenticator");
  authentication_ = std::move(authentication);
  // A new session (an elastic round) numbers its exchanges from 1 on every member, a restarted one too.
  session_exchanges_ = 0;
}

void IslandExchange::corrupt_if_hooked(at::Tensor& message, int attempt) {
  if (attempt != 0 || exchanges_ != corruption_.exchange || group_.rank() != corruption_.island) return;
  message = message.clone();  // the sender's own copy stays intact, as on a real link
  message.data_ptr<uint8_t>()[0] ^= 0x01;
  corruption_.exchange = -1;  // the first chunk sent only
}

void IslandExchange::die_if_hooked() const {
  if (exchanges_ != die_in_exchange_) return;
  std::cerr << "atoll: fault hook: island " << group_.rank()
            << " of this round dies (SIGKILL) in outer exchange " << exchanges_ << std::endl;
  std::raise(SIGKILL);
}

int IslandExchange::agree_on_rejected(const std::vector<int>& rejected_here) {
  if (!authentication_) return -1;
  const int k = group_.size(), me = group_.rank();
  at::Tensor failures = at::zeros({k}, at::TensorOptions().dtype(at::kInt));
  for (int sender : rejected_here) {
    ++rejected_chunks_;
    failures[sender] += 1;
    std::cerr << "atoll: outer exchange: a chunk island " << sender << " sent to island " << me
              << " failed its HMAC check (altered in flight, or not made with the job's secret); it was not "
                 "averaged in\n";
  }
  group_.all_reduce(failures, comm::ReduceOp::kSum)->wait();
  bytes_sent_ += comm::ring_wire_bytes(failures.nbytes(), k, 2);
  return most_rejected(failures);
}

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
  if (vote.item<int>() >= 0) throw_diverged(k - 1 - vote.item<int>());
}

// The exchange runs on host copies over the group's MPI plane: islands sit behind links NCCL is not
// made for, and the codecs' bytes are small. On the CPU the copies are the tensors themselves.
template <typename Result, typename Exchange>
Result IslandExchange::settled(Exchange exchange) {
  if (!settle_) return exchange();
  std::optional<Result> result;
  std::string failure = "another member's part of the exchange failed";
  try {
    result = exchange();
  } catch (const comm::GroupFailure& e) {
    failure = e.what();
  }
  if (!settle_(result.has_value())) throw RoundFailed("outer exchange: the round did not count: " + failure);
  return std::move(*result);
}

at::Tensor IslandExchange::mean(const at::Tensor& values, double norm) {
  return settled<at::Tensor>([&] { return mean_on_host(values.cpu(), norm); }).to(values.device());
}

std::vector<at::Tensor> IslandExchange::group_mean(const std::vector<at::Tensor>& tensors,
                                                   const std::vector<int>& members) {
  std::vector<at::Tensor> host;
  for (const at::Tensor& t : tensors) host.push_back(t.cpu());
  std::vector<at::Tensor> means =
      settled<std::vector<at::Tensor>>([&] { return group_mean_on_host(host, members); });
  for (size_t t = 0; t < means.size(); ++t) means[t] = means[t].to(tensors[t].device());
  return means;
}

void IslandExchange::agree_on_left_out(double norm, uint64_t& sent) {
  left_out_.clear();
  if (max_norm_ <= 0.0) return;
  const int k = group_.size();
  at::Tensor norms = at::zeros({k}, at::TensorOptions().dtype(at::kDouble));
  norms[group_.rank()] = norm;
  group_.all_reduce(norms, comm::ReduceOp::kSum)->wait();
  sent += comm::ring_wire_bytes(norms.nbytes(), k, 2);
  for (int j = 0; j < k; ++j) {
    const double norm_j = norms[j].item<double>();
    if (norm_j > max_norm_) left_out_.push_back({j, norm_j});
  }
}

at::Tensor IslandExchange::mean_on_host(const at::Tensor& values, double norm) {
  const int k = group_.size();
  left_out_.clear();
  if (k == 1) return values.clone();
  const auto start = Clock::now();
  throw_unless_all_finite(values);
  uint64_t sent = 0;
  agree_on_left_out(norm, sent);
  // An island left out, or catching up, sends zeros, so the sums hold the others' values only.
  const std::vector<int> counted = contributors();
  const bool me_left_out = std::any_of(left_out_.begin(), left_out_.end(),
                                       [&](const LeftOut& l) { return l.island == group_.rank(); }) ||
                           !std::binary_search(counted.begin(), counted.end(), group_.rank());
  const at::Tensor sent_values = me_left_out ? at::zeros_like(values) : values;
  const int divisor = std::max(1, static_cast<int>(counted.size()) - static_cast<int>(left_out_.size()));
  if (topk_.enabled()) {
    std::vector<int> everyone(static_cast<size_t>(k));
    std::iota(everyone.begin(), everyone.end(), 0);
    at::Tensor sum =
        retried_until_authentic<std::vector<at::Tensor>>([&](int attempt, int& rejected) {
          return try_group_sums({sent_values}, everyone, /*sparse=*/true, attempt, sent, rejected);
        }).front();
    account(start, sent, k);  // the finiteness vote, then one message to every other island
    return sum.div_(divisor);
  }
  at::Tensor out = retried_until_authentic<at::Tensor>(
      [&](int attempt, int& rejected) { return try_mean(sent_values, divisor, attempt, sent, rejected); });
  // The finiteness vote, k-1 messages in each of the two all-to-alls.
  account(start, sent, 2 * k - 1);
  return out;
}

std::optional<at::Tensor> IslandExchange::try_mean(const at::Tensor& values, int divisor, int attempt,
                                                   uint64_t& sent, int& rejected) {
  const int k = group_.size(), me = group_.rank();
  const int64_t n = values.numel();
  const comm::ShardRange mine = comm::shard_range(n, k, me);
  const int64_t tag = tag_bytes();

  // 1. Reduce-scatter: island j receives every island's encoded chunk j.
  std::vector<comm::P2POp> ops;
  std::vector<at::Tensor> received(static_cast<size_t>(k));
  const int64_t my_chunk_bytes = encoded_bytes(codec_, mine.numel);
  for (int j = 0; j < k; ++j) {
    const comm::ShardRange chunk = comm::shard_range(n, k, j);
    const at::Tensor encoded = encode(codec_, values.narrow(0, chunk.offset, chunk.numel));
    if (j == me) {
      received[static_cast<size_t>(j)] = encoded;
      continue;
    }
    at::Tensor message = tagged(encoded, authentication_ ? context(attempt, 1, me, j) : "");
    corrupt_if_hooked(message, attempt);
    ops.push_back({comm::P2POp::Kind::kSend, message, j, 0});
    sent += static_cast<uint64_t>(message.numel());
    received[static_cast<size_t>(j)] =
        at::empty({my_chunk_bytes + tag}, at::TensorOptions().dtype(at::kByte));
    ops.push_back({comm::P2POp::Kind::kRecv, received[static_cast<size_t>(j)], j, 0});
  }
  group_.batch_p2p(ops)->wait();
  die_if_hooked();
  std::vector<int> rejected_here;
  for (int j = 0; j < k && authentication_; ++j)
    if (j != me && !authentic(received[static_cast<size_t>(j)], my_chunk_bytes, context(attempt, 1, j, me)))
      rejected_here.push_back(j);
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;
  at::Tensor sum = at::zeros({mine.numel}, values.options());
  for (int j = 0; j < k; ++j)
    sum.add_(decode(codec_, received[static_cast<size_t>(j)].narrow(0, 0, my_chunk_bytes), mine.numel));
  sum.div_(divisor);

  // 2. Every island's encoded (and tagged) mean chunk to every other, as one batch of sends and
  // receives all posted at once: the same bytes per island as a ring all-gather, without its
  // step-by-step hand-offs (which left a shaped 100 Mbit/s link half used).
  const at::Tensor own = tagged(encode(codec_, sum), authentication_ ? context(attempt, 2, me, -1) : "");
  std::vector<at::Tensor> means(static_cast<size_t>(k));
  ops.clear();
  for (int j = 0; j < k; ++j) {
    if (j == me) {
      means[static_cast<size_t>(j)] = own;
      continue;
    }
    ops.push_back({comm::P2POp::Kind::kSend, own, j, 1});
    sent += static_cast<uint64_t>(own.numel());
    means[static_cast<size_t>(j)] = at::empty({encoded_bytes(codec_, comm::shard_range(n, k, j).numel) + tag},
                                              at::TensorOptions().dtype(at::kByte));
    ops.push_back({comm::P2POp::Kind::kRecv, means[static_cast<size_t>(j)], j, 1});
  }
  group_.batch_p2p(ops)->wait();
  rejected_here.clear();
  for (int j = 0; j < k && authentication_; ++j)
    if (j != me &&
        !authentic(means[static_cast<size_t>(j)], encoded_bytes(codec_, comm::shard_range(n, k, j).numel),
                   context(attempt, 2, j, -1)))
      rejected_here.push_back(j);
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;

  at::Tensor out = at::empty({n}, values.options());
  for (int j = 0; j < k; ++j) {
    const comm::ShardRange chunk = comm::shard_range(n, k, j);
    out.narrow(0, chunk.offset, chunk.numel)
        .copy_(decode(codec_, means[static_cast<size_t>(j)].narrow(0, 0, encoded_bytes(codec_, chunk.numel)),
                      chunk.numel));
  }
  return out;
}

std::vector<at::Tensor> IslandExchange::group_mean_on_host(const std::vector<at::Tensor>& tensors,
                                                           const std::vector<int>& members) {
  const auto start = Clock::now();
  uint64_t sent = 0;
  std::vector<at::Tensor> sums =
      retried_until_authentic<std::vector<at::Tensor>>([&](int attempt, int& rejected) {
        return try_group_sums(tensors, members, /*sparse=*/false, attempt, sent, rejected);
      });
  account(start, sent, static_cast<int>(members.size()) - 1);
  for (at::Tensor& sum : sums) sum.div_(static_cast<double>(members.size()));
  return sums;
}

std::optional<std::vector<at::Tensor>> IslandExchange::try_group_sums(const std::vector<at::Tensor>& tensors,
                                                                      const std::vector<int>& members,
                                                                      bool sparse, int attempt,
                                                                      uint64_t& sent, int& rejected) {
  const int me = group_.rank();
  std::vector<comm::P2POp> ops;
  // encoded[t][m]: tensor t of member m (this island's own encoded too: every member decodes the
  // same bytes for every contribution); its sender is members[m]. Tags name the tensor as the phase.
  std::vector<std::vector<at::Tensor>> encoded(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const at::Tensor own = sparse ? encode(topk_, tensors[t]) : encode(codec_, tensors[t]);
    at::Tensor message = tagged(own, authentication_ ? context(attempt, static_cast<int>(t), me, -1) : "");
    corrupt_if_hooked(message, attempt);
    for (int member : members) {
      if (member == me) {
        encoded[t].push_back(own);
        continue;
      }
      ops.push_back({comm::P2POp::Kind::kSend, message, member, static_cast<int>(t)});
      sent += static_cast<uint64_t>(message.numel());
      encoded[t].push_back(at::empty_like(message));
      ops.push_back({comm::P2POp::Kind::kRecv, encoded[t].back(), member, static_cast<int>(t)});
    }
  }
  if (!ops.empty()) group_.batch_p2p(ops)->wait();
  die_if_hooked();
  std::vector<int> rejected_here;
  const int64_t tag = tag_bytes();
  for (size_t m = 0; m < members.size() && authentication_; ++m) {
    const int sender = members[m];
    for (size_t t = 0; t < tensors.size() && sender != me; ++t) {
      const at::Tensor& message = encoded[t][m];
      if (!authentic(message, message.numel() - tag, context(attempt, static_cast<int>(t), sender, -1))) {
        rejected_here.push_back(sender);
        break;  // one line per sender
      }
    }
  }
  if ((rejected = agree_on_rejected(rejected_here)) >= 0) return std::nullopt;
  std::vector<at::Tensor> sums;
  for (size_t t = 0; t < tensors.size(); ++t) {
    at::Tensor sum = at::zeros_like(tensors[t]);
    for (size_t m = 0; m < members.size(); ++m) {
      const at::Tensor& bytes = encoded[t][m];
      const at::Tensor payload = bytes.narrow(0, 0, members[m] == me ? bytes.numel() : bytes.numel() - tag);
      const int64_t numel = tensors[t].numel();
      sum.add_(sparse ? decode(topk_, payload, numel) : decode(codec_, payload, numel));
    }
    sums.push_back(std::move(sum));
  }
  return sums;
}

}  // namespace atl::optim::outer
