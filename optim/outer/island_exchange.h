// The outer optimizers' communication across islands (DESIGN §6): an average that ends bit-identical
// on every island whatever the codec, and NoLoCo's small-group average -- with the bytes it sent
// and the link simulator applied.
//
// mean() is a reduce-scatter and an all-gather, both over encoded bytes:
//   1. the tensor is cut into k chunks (comm::shard_range); island j receives everyone's encoded
//      chunk j (one all-to-all), decodes them and sums them in island order in fp32;
//   2. island j encodes its mean chunk once and sends it to every other island (a second all-to-all,
//      all posted at once: a ring's hand-offs left a shaped link half idle); every island decodes
//      the same bytes.
// So each island sends 2(k-1)/k of the encoded tensor -- a ring all-reduce's volume at the codec's
// width -- the error is two roundings, and no island's copy differs in a bit (island j uses the
// decoded bytes of its own chunk too, not its unrounded sum).
//
// Authenticated (islands as separate jobs with a job secret): every message carries an HMAC-SHA256
// tag of its bytes in a context naming the session, the exchange, the attempt, the phase, sender and
// receiver, so a chunk altered in flight, replayed from another round or made without the secret
// fails. Each receiver checks every tag before it decodes anything; the islands then agree (one
// small all-reduce per phase) on whether any chunk failed, and if one did, the exchange is run again
// from the start, up to kAuthenticatedAttempts times -- a failed chunk is never averaged in.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/message_authenticator.h"
#include "optim/outer/codec.h"
#include "optim/outer/exchange_checks.h"
#include "optim/outer/island_average.h"
#include "optim/outer/simulated_link.h"
#include "optim/outer/topk_codec.h"

namespace atl::optim::outer {

// Thrown by mean() when its round did not count on every member (islands as separate jobs with a
// membership per round, settle_rounds_with): nothing of it was applied; meet again and retry.
class RoundFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class IslandExchange : public IslandAverage {
 public:
  static constexpr int kAuthenticatedAttempts = outer::kAuthenticatedAttempts;

  // `islands`: the island group (one rank of every island with the same place in its island).
  IslandExchange(comm::Communicator& islands, Codec codec, SimulatedLink link);

  int islands() const override { return group_.size(); }
  int island() const override { return group_.rank(); }

  // The mean over every island of `values` (contiguous fp32, on any device; exchanged from host
  // copies over MPI), bit-identical on every island. `norm`: the L2 norm of this island's whole
  // update, which `values` is a part of (every rank of an island passes the same), checked against
  // bound_norms(). Blocks, including the simulated link's delay. Throws std::invalid_argument on
  // non-finite values.
  at::Tensor mean(const at::Tensor& values, double norm = 0.0);
  // The means over `members` (island indices, this island among them, the same list on every
  // member) of each tensor, summed in `members` order.
  std::vector<at::Tensor> group_mean(const std::vector<at::Tensor>& tensors, const std::vector<int>& members);
  // IslandAverage: the values are this rank's own, whatever the fragment.
  at::Tensor average(const at::Tensor& values, double norm, int /*fragment*/) override {
    return mean(values, norm);
  }
  std::vector<at::Tensor> group_average(const std::vector<at::Tensor>& tensors,
                                        const std::vector<int>& members) override {
    return group_mean(tensors, members);
  }

  // From now on mean() sends only the top k of every kTopkChunk elements of each island's values,
  // the kept values in `encoding.values` (SparseLoCo), to every other island, which sums the
  // islands' decoded values in island order: the sum of sparse vectors is not sparse, so there is
  // no reduce-scatter. group_mean() stays dense.
  void sparsify(TopkEncoding encoding) { topk_ = encoding; }

  // From now on every message is tagged and checked (see the top of this file).
  void authenticate(ExchangeAuthentication authentication);
  void corrupt_in_flight(InFlightCorruption corruption) override { corruption_ = corruption; }
  // Test hook (ATOLL_FAULT sigkill_in_exchange@EXCHANGE): this process dies (SIGKILL) in its
  // `exchange`-th exchange (1-based) once its first phase is through, as a machine losing power
  // mid-exchange would: the others' second phase fails.
  void die_in_exchange(int64_t exchange) { die_in_exchange_ = exchange; }
  // Islands whose group can lose a member mid-exchange: after every mean(), `settle(succeeded)`
  // (this rank's part worked, no GroupFailure) returns whether the round counts everywhere; when it
  // does not, mean() throws RoundFailed instead of returning.
  void settle_rounds_with(std::function<bool(bool succeeded)> settle) { settle_ = std::move(settle); }
  // The islands whose values the next means hold (ascending; empty: every island): a round whose
  // group includes islands catching up averages over the others only (the others send zeros), and
  // NoLoCo draws its gossip groups among them.
  void set_contributors(std::vector<int> contributors) { contributors_ = std::move(contributors); }
  std::vector<int> contributors() const override {
    return contributors_.empty() ? IslandAverage::contributors() : contributors_;
  }
  // Islands whose norm (passed to mean()) exceeds `max_norm` are left out of that mean: they send
  // zeros and the mean divides by the others (0: no bound). The islands agree on the norms first
  // (one small all-reduce), so every island leaves out the same ones.
  void bound_norms(double max_norm) override { max_norm_ = max_norm; }
  using LeftOut = outer::LeftOut;
  // The islands the last mean() left out for their norm.
  const std::vector<LeftOut>& left_out() const override { return left_out_; }
  // Chunks this rank received that failed their tag (none of them was averaged in).
  uint64_t rejected_chunks() const { return rejected_chunks_.load(); }

  // Bytes this rank has sent in exchanges (encoded sizes, the volume a link carries).
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  // Counts `bytes` sent between islands by an average beside this exchange (sliced_average.h).
  void count_sent(uint64_t bytes) { bytes_sent_ += bytes; }
  // Seconds the simulated link has accounted for.
  double simulated_seconds() const { return simulated_ns_.load() * 1e-9; }

 private:
  // `exchange()`'s result once the round protocol says it counts on every member (settle_rounds_with;
  // RoundFailed when it does not); without one, the result as it is.
  template <typename Result, typename Exchange>
  Result settled(Exchange exchange);
  at::Tensor mean_on_host(const at::Tensor& values, double norm);
  // One attempt of mean(), dividing the sums by `divisor`: nullopt when a chunk failed its tag
  // (every island then returns nullopt, with `rejected` the lowest island whose chunk failed).
  std::optional<at::Tensor> try_mean(const at::Tensor& values, int divisor, int attempt, uint64_t& sent,
                                     int& rejected);
  std::vector<at::Tensor> group_mean_on_host(const std::vector<at::Tensor>& tensors,
                                             const std::vector<int>& members);
  // One attempt of every member sending each tensor (encoded: top-k when `sparse`, else the codec)
  // to every other: the members' decoded tensors summed in `members` order.
  std::optional<std::vector<at::Tensor>> try_group_sums(const std::vector<at::Tensor>& tensors,
                                                        const std::vector<int>& members, bool sparse,
                                                        int attempt, uint64_t& sent, int& rejected);
  // Runs `attempt_once(attempt, rejected)` until it gives a result (exchange_checks.h), numbering
  // the exchange in this session too.
  template <typename Result, typename Attempt>
  Result retried_until_authentic(Attempt attempt_once) {
    ++session_exchanges_;
    return outer::retried_until_authentic<Result>(exchanges_, group_.rank() == 0, attempt_once);
  }
  void throw_unless_all_finite(const at::Tensor& values);
  // Sets left_out_ from every island's norm (agreed over the group) against max_norm_.
  void agree_on_left_out(double norm, uint64_t& sent);
  void account(std::chrono::steady_clock::time_point start, uint64_t bytes, int messages);

  // Tagging (exchange_checks.h): `message` with its tag appended, and whether a received one's tag is
  // right. Without a secret, messages travel as they are.
  int64_t tag_bytes() const { return outer::tag_bytes(authentication_); }
  std::string context(int attempt, int phase, int sender, int receiver) const {
    return chunk_context(*authentication_, session_exchanges_, attempt, phase, sender, receiver);
  }
  at::Tensor tagged(const at::Tensor& payload, const std::string& context) const {
    return outer::tagged(authentication_, payload, context);
  }
  bool authentic(const at::Tensor& message, int64_t payload_bytes, const std::string& context) const {
    return outer::authentic(authentication_, message, payload_bytes, context);
  }
  // The senders whose chunks failed here, agreed over the group: the sender the most receivers
  // rejected (the lowest of a tie), or -1 when none did. No-op (-1) without a secret.
  int agree_on_rejected(const std::vector<int>& rejected_here);
  void corrupt_if_hooked(at::Tensor& message, int attempt);
  void die_if_hooked() const;

  comm::Communicator& group_;
  Codec codec_;
  TopkEncoding topk_;  // disabled unless sparsify()
  SimulatedLink link_;
  std::optional<ExchangeAuthentication> authentication_;
  InFlightCorruption corruption_;
  std::function<bool(bool)> settle_;
  std::vector<int> contributors_;
  double max_norm_ = 0.0;
  std::vector<LeftOut> left_out_;
  int64_t die_in_exchange_ = -1;
  int64_t exchanges_ = 0;          // mean/group_mean calls so far
  int64_t session_exchanges_ = 0;  // those since authenticate(): part of every tag's context
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> simulated_ns_{0};
  std::atomic<uint64_t> rejected_chunks_{0};
};

}  // namespace atl::optim::outer
