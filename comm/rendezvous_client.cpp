#include "comm/rendezvous_client.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "comm/gloo_communicator.h"
#include "comm/message_authenticator.h"
#include "comm/rendezvous_state.h"
#include "comm/tcp_probe.h"

namespace atl::comm {
namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count() / 1000) + " s";
}

}  // namespace

std::string rendezvous_name(const RendezvousAddress& address) {
  return "outer.rendezvous " + address.host + ":" + std::to_string(address.port);
}

bool connection_lost(const std::exception& error) {
  return dynamic_cast<const c10::DistNetworkError*>(&error) != nullptr;
}

RendezvousClient::RendezvousClient(const RendezvousAddress& address, std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds reconnect)
    : address_(address),
      where_(rendezvous_name(address)),
      timeout_(timeout),
      reconnect_(reconnect),
      name_(random_hex(8)) {
  const auto unreachable = [&](const std::string& reason) {
    return std::invalid_argument(where_ + " could not be reached within " + seconds_text(timeout_) + " (" +
                                 reason + "); start it with `atoll rendezvous --port " +
                                 std::to_string(address_.port) + "` or fix the address");
  };
  if (const std::string reason = wait_for_listener(address_.host, address_.port, Clock::now() + timeout_);
      !reason.empty())
    throw unreachable(reason);
  try {
    store_ = connect(timeout_);
  } catch (const c10::Error& e) {
    throw unreachable(one_line_reason(e));
  }
}

c10::intrusive_ptr<c10d::Store> RendezvousClient::connect(std::chrono::milliseconds timeout) const {
  c10d::TCPStoreOptions options;
  options.port = address_.port;
  options.isServer = false;
  options.timeout = timeout;
  // c10d's connect retries a refused connection with a bounded backoff until `timeout`.
  auto store = c10::make_intrusive<c10d::TCPStore>(address_.host, options);
  store->wait({durable::kReady}, timeout);
  store->setTimeout(timeout_);
  return store;
}

void RendezvousClient::reconnect(const std::exception& lost, const Cancelled& cancelled) {
  const auto start = Clock::now();
  const auto deadline = start + reconnect_;
  std::cerr << "atoll: " << where_ << " lost (" << one_line_reason(lost) << "); reconnecting for up to "
            << seconds_text(reconnect_) << std::endl;
  std::string last = one_line_reason(lost);
  // Tries of at most kTry (c10d's connect overshoots it by its own retry delay, about 0.4 s), with a
  // pause between them doubling from 0.1 s up to kLongestPause: a rendezvous back is found within
  // about 1.5 s, and a cancelled wait ends as soon.
  constexpr std::chrono::milliseconds kTry{500}, kLongestPause{1000};
  std::chrono::milliseconds pause{100};
  const auto give_up_if_cancelled = [&] {
    if (cancelled && cancelled())
      throw std::runtime_error(where_ + " was lost; stopped waiting for it (shutting down)");
  };
  while (Clock::now() < deadline) {
    give_up_if_cancelled();
    try {
      // Nothing listening yet: the next try (c10d's own connect would log a stack trace for it).
      if (const std::string reason =
              wait_for_listener(address_.host, address_.port, std::min(deadline, Clock::now() + kTry));
          !reason.empty()) {
        last = reason;
        continue;
      }
      store_ = connect(
          std::min(kTry, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())));
      std::cerr << "atoll: " << where_ << " is back after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() /
                       1000.0
                << " s; carrying on" << std::endl;
      return;
    } catch (const c10::Error& e) {
      last = one_line_reason(e);  // not back yet, or lost again while restoring
    }
    give_up_if_cancelled();
    std::this_thread::sleep_for(
        std::min(pause, std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::max(deadline - Clock::now(), Clock::duration::zero()))));
    pause = std::min(pause * 2, kLongestPause);
  }
  throw std::runtime_error(where_ + " was lost and did not come back within " + seconds_text(reconnect_) +
                           " (outer.reconnect_s; last: " + last + "); restart it on port " +
                           std::to_string(address_.port) +
                           " with its --state file, then resume the island jobs from their checkpoints");
}

void RendezvousClient::persist(const std::vector<std::string>& keys) {
  const std::string ack = "durable/ack/" + name_ + "/" + std::to_string(++requests_);
  std::string request = ack;
  for (const std::string& key : keys) request += "\n" + key;
  store_->queuePush(durable::kRequests, store_bytes(request));
  try {
    store_->wait({ack}, timeout_);
  } catch (const c10::DistStoreError& e) {
    throw std::runtime_error(where_ + " did not confirm keeping " + keys.front() + " within " +
                             seconds_text(timeout_) + " (" + one_line_reason(e) +
                             "); see the rendezvous' log (can it write its --state file?)");
  }
  store_->deleteKey(ack);
}

}  // namespace atl::comm
