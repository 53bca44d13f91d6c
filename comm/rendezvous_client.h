// An island's connection to `atoll rendezvous` that outlives the rendezvous' restarts (issue 63).
//
// A store call that finds the connection lost (the rendezvous died: killed, its machine rebooted)
// waits for the rendezvous to come back on the same address -- tries of 0.5 s, pauses growing from
// 0.1 s to 1 s, for at most `reconnect` -- and then runs the island's step again from
// its start: whatever the step wrote that was not kept (persist) went with the old rendezvous, and
// whatever was kept is back. An island acts on a record only once it is kept, so a step met again
// after a restart comes to the same records, or to new ones no island acted on.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/rendezvous_address.h"

namespace atl::comm {

// "outer.rendezvous HOST:PORT", for messages.
std::string rendezvous_name(const RendezvousAddress& address);

// Whether `error` (from a store call) says the connection to the rendezvous is lost.
bool connection_lost(const std::exception& error);

class RendezvousClient {
 public:
  // Connects (waiting for a restarted rendezvous to have put its records back). Throws
  // std::invalid_argument naming the address and the fix when it cannot be reached within `timeout`.
  // `timeout` also bounds each wait for a kept record; `reconnect` how long a lost connection is
  // waited for.
  RendezvousClient(const RendezvousAddress& address, std::chrono::milliseconds timeout,
                   std::chrono::milliseconds reconnect);

  // Whether to stop waiting for a lost rendezvous (asked between tries, at least every 2 s): its
  // caller is shutting down. Null: never.
  using Cancelled = std::function<bool()>;

  c10d::Store& store() { return *store_; }
  const c10::intrusive_ptr<c10d::Store>& store_pointer() const { return store_; }

  // Runs `step()` (calls on store()) until it returns without the connection lost in between,
  // reconnecting after each loss; rethrows anything else. Throws std::runtime_error naming the
  // address and how long it waited when the rendezvous did not come back within `reconnect`.
  template <typename Step>
  auto run(Step&& step, const Cancelled& cancelled = nullptr) -> decltype(step()) {
    for (;;) {
      try {
        return step();
      } catch (const std::exception& e) {
        if (!connection_lost(e)) throw;
        reconnect(e, cancelled);
      }
    }
  }

  // Returns once the rendezvous has kept the current values of `keys` (written its state file when
  // it has one). A lost connection throws as any store call does (run() meets the step again).
  void persist(const std::vector<std::string>& keys);

  // Waits for the rendezvous to come back after `lost` and connects again. Throws
  // std::runtime_error naming the address and how long it waited when it does not within
  // `reconnect`, or once `cancelled()`.
  void reconnect(const std::exception& lost, const Cancelled& cancelled = nullptr);

  const std::string& where() const { return where_; }

 private:
  // A connection within `timeout`, once the server's records are back (durable::kReady).
  c10::intrusive_ptr<c10d::Store> connect(std::chrono::milliseconds timeout) const;

  RendezvousAddress address_;
  std::string where_;
  std::chrono::milliseconds timeout_, reconnect_;
  std::string name_;       // what makes this client's acknowledgement keys its own
  uint64_t requests_ = 0;  // this client's keeping requests so far
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace atl::comm
