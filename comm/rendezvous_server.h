// The meeting point of islands that run as separate jobs (`atoll rendezvous`; issue 19): a c10d
// TCPStore served on every interface while the object lives, plus the keeper of its durable
// records (issue 63). Islands ask for a record to be kept (RendezvousClient::persist, a request on
// the store's queue durable::kRequests); the keeper, a thread of the server, writes it to the state
// file (RendezvousState) and only then acknowledges it. Started on an existing state file, the
// server puts its records back into the store before islands may use it (durable::kReady), so
// islands whose connection dropped reconnect to the restarted rendezvous and carry on.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "comm/message_authenticator.h"
#include "comm/rendezvous_state.h"

namespace atl::comm {

// The admission record (store key "admission"): a nonce and its tag under the job secret, written
// by the server started with the secret or else by the first island to arrive. Not a secret itself.
constexpr const char* kAdmissionKey = "admission";
// A fresh record: "NONCE:TAG".
std::string new_admission_record(const MessageAuthenticator& authenticator);
// The record's nonce when its tag holds under `authenticator`'s secret; nullopt otherwise.
std::optional<std::string> admission_nonce(const MessageAuthenticator& authenticator,
                                           const std::string& record);

class RendezvousServer {
 public:
  // Port 0 picks a free port (port() tells which). With `authenticator`, islands must prove its
  // secret to be admitted. `state_file` "": nothing is kept (a restart forgets every round); else
  // the records are kept there and, when it exists, resumed from it. Throws std::invalid_argument
  // naming the file when it is damaged or the secret is not its run's, std::runtime_error when the
  // port cannot be served.
  explicit RendezvousServer(uint16_t port,
                            std::shared_ptr<const MessageAuthenticator> authenticator = nullptr,
                            const std::string& state_file = "");
  // Stops the keeper; the store closes with the object (islands see their connections drop).
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  uint16_t port() const { return store_->getPort(); }
  // The records the server started from (0 for a new run) and the newest round that counted.
  size_t resumed_records() const { return resumed_records_; }
  std::optional<int64_t> resumed_round() const { return resumed_round_; }

 private:
  // Serves keeping requests until the destructor's stop request.
  void keep(c10::intrusive_ptr<c10d::TCPStore> connection);

  RendezvousState state_;
  size_t resumed_records_ = 0;
  std::optional<int64_t> resumed_round_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::string stop_request_;  // the request that stops the keeper: random, so no island sends it
  std::thread keeper_;
};

}  // namespace atl::comm
