#include "optim/outer/exchange_checks.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace atl::optim::outer {

int64_t tag_bytes(const std::optional<ExchangeAuthentication>& authentication) {
  return authentication ? static_cast<int64_t>(comm::MessageAuthenticator::kTagBytes) : 0;
}

std::string chunk_context(const ExchangeAuthentication& authentication, int64_t exchange, int attempt,
                          int phase, int sender, int receiver) {
  return authentication.session + "|exchange " + std::to_string(exchange) + "|attempt " +
         std::to_string(attempt) + "|phase " + std::to_string(phase) + "|" + std::to_string(sender) + ">" +
         (receiver < 0 ? "all" : std::to_string(receiver));
}

at::Tensor tagged(const std::optional<ExchangeAuthentication>& authentication, const at::Tensor& payload,
                  const std::string& context) {
  if (!authentication) return payload;
  at::Tensor message = at::empty({payload.numel() + tag_bytes(authentication)}, payload.options());
  message.narrow(0, 0, payload.numel()).copy_(payload);
  const comm::MessageAuthenticator::Tag tag = authentication->authenticator->tag(
      context, payload.data_ptr<uint8_t>(), static_cast<size_t>(payload.numel()));
  std::copy(tag.begin(), tag.end(), message.data_ptr<uint8_t>() + payload.numel());
  return message;
}

bool authentic(const std::optional<ExchangeAuthentication>& authentication, const at::Tensor& message,
               int64_t payload_bytes, const std::string& context) {
  if (!authentication) return true;
  const uint8_t* bytes = message.data_ptr<uint8_t>();
  return authentication->authenticator->verify(context, bytes, static_cast<size_t>(payload_bytes),
                                               bytes + payload_bytes);
}

int most_rejected(const at::Tensor& failures) {
  const int most = failures.max().item<int>();
  return most == 0 ? -1 : failures.eq(most).nonzero()[0].item<int>();
}

void throw_diverged(int island) {
  throw std::invalid_argument("outer exchange: island " + std::to_string(island) +
                              " has non-finite values in its pseudo-gradient (its inner training diverged); "
                              "lower optim.lr or set optim.grad_clip, and resume from the last checkpoint");
}

}  // namespace atl::optim::outer
