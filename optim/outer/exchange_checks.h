// What every outer exchange checks, shared by the islands' exchange (island_exchange.h) and the
// rank-by-rank canonical one (sliced_average.h): the HMAC-SHA256 tag every chunk carries with a job
// secret (appended to the chunk's bytes, over a context naming the session, exchange, attempt,
// phase, sender and receiver, checked by the receiver before it decodes anything), the retries of
// an exchange whose chunks failed, and the line that stops every island when one diverged.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "comm/message_authenticator.h"

namespace atl::optim::outer {

// The job secret and what makes this group's tags its own (the rendezvous' nonce and round).
struct ExchangeAuthentication {
  std::shared_ptr<const comm::MessageAuthenticator> authenticator;
  std::string session;
};

// Bytes a tag adds to a chunk (0 without a secret).
int64_t tag_bytes(const std::optional<ExchangeAuthentication>& authentication);
// The context of a chunk: `receiver` -1 for a chunk sent alike to every other island.
std::string chunk_context(const ExchangeAuthentication& authentication, int64_t exchange, int attempt,
                          int phase, int sender, int receiver);
// `payload` (uint8) with its tag appended; `payload` itself without a secret.
at::Tensor tagged(const std::optional<ExchangeAuthentication>& authentication, const at::Tensor& payload,
                  const std::string& context);
// Whether the tag after the first `payload_bytes` of `message` is right (always, without a secret).
bool authentic(const std::optional<ExchangeAuthentication>& authentication, const at::Tensor& message,
               int64_t payload_bytes, const std::string& context);

// Attempts of an exchange before every island stops naming the one whose chunks kept failing.
constexpr int kAuthenticatedAttempts = 3;

// The island most receivers rejected, from `failures` (per sending island, summed over the
// receivers): an island with another secret fails at every receiver, while it rejects each honest
// sender only once. -1 when none was rejected; the lowest of a tie.
int most_rejected(const at::Tensor& failures);

// Runs `attempt_once(attempt, rejected)` until it gives a result, at most kAuthenticatedAttempts
// times, counting the exchange in `exchanges` first; `speaks`: this rank writes the retry lines. Then
// throws std::runtime_error naming the island whose chunks kept failing.
template <typename Result, typename Attempt>
Result retried_until_authentic(int64_t& exchanges, bool speaks, Attempt attempt_once) {
  ++exchanges;
  int rejected = -1;
  for (int attempt = 0; attempt < kAuthenticatedAttempts; ++attempt) {
    std::optional<Result> result = attempt_once(attempt, rejected);
    if (result) return std::move(*result);
    if (speaks)
      std::cerr << "atoll: outer exchange " << exchanges << ": island " << rejected
                << "'s chunk failed its HMAC check; the exchange runs again (attempt " << attempt + 2
                << " of " << kAuthenticatedAttempts << ")\n";
  }
  throw std::runtime_error(
      "outer exchange " + std::to_string(exchanges) + ": chunks from island " + std::to_string(rejected) +
      " failed their HMAC check " + std::to_string(kAuthenticatedAttempts) +
      " times in a row and were never averaged in; check that island's outer.secret_file "
      "and its link, then resume every island from the last checkpoint");
}

// Stops every island when island `island`'s pseudo-gradient holds NaN or Inf (std::invalid_argument).
[[noreturn]] void throw_diverged(int island);

}  // namespace atl::optim::outer
