// One job per island id (issue 19): an island job holds its id at the rendezvous while it runs, so
// that a second job started with the same outer.island -- a typo, a relaunch while the first still
// runs -- is refused with one line instead of arriving at rounds as a second copy of the island.
//
// The store holds the holder's token under the island's key, and the holder advances a heartbeat
// counter every kBeat from a thread of its own. A job that finds the id held by another token
// watches that heartbeat for kSilence: if it moved, the holder is alive and this job is the
// duplicate (std::invalid_argument); if it stood still, the holder is gone (killed, its machine lost)
// and this job takes the id over with compare-and-set. A holder that ends cleanly releases the id,
// so its successor does not wait. The lease is about mistakes, not attacks: anyone who can write to
// the store can move it (arrivals, not leases, are what the job secret authenticates).
//
// The holder is a record the rendezvous keeps (RendezvousClient::persist): a restarted
// `atoll rendezvous --state FILE` still knows who holds each id, and the heartbeat reconnects to it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "comm/rendezvous_address.h"
#include "comm/rendezvous_client.h"

namespace atl::comm {

class IslandLease {
 public:
  static constexpr std::chrono::milliseconds kBeat{500};
  static constexpr std::chrono::milliseconds kSilence{3000};

  // Claims island `island` for `token` (unique to this job) at the rendezvous at `address`,
  // waiting kSilence when another token holds it. Throws std::invalid_argument when a live job
  // holds it, or the rendezvous cannot be reached within `timeout`. A lost rendezvous is waited
  // for up to `reconnect` (RendezvousClient).
  IslandLease(const RendezvousAddress& address, int island, std::string token,
              std::chrono::milliseconds timeout, std::chrono::milliseconds reconnect);
  // Stops the heartbeat and releases the id.
  ~IslandLease();
  IslandLease(const IslandLease&) = delete;
  IslandLease& operator=(const IslandLease&) = delete;

 private:
  // Whether this job holds the id now, after claiming it when it was free or `holder` stood still.
  bool claim();
  // Whether the heartbeat of `holder` moved within kSilence.
  bool alive(const std::string& holder);
  std::string beat_key(const std::string& holder) const;
  void beat_until_stopped();

  RendezvousClient client_;
  int island_;
  std::string token_;
  std::string holder_key_;
  std::mutex mutex_;
  std::condition_variable stopping_;
  bool stop_ = false;
  std::thread heartbeat_;
};

}  // namespace atl::comm
