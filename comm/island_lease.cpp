#include "comm/island_lease.h"

#include <stdexcept>
#include <vector>

#include "comm/rendezvous_state.h"

namespace atl::comm {
namespace {

constexpr const char* kReleased = "released";
constexpr int kClaimTries = 3;  // a takeover can lose a race with another successor

}  // namespace

IslandLease::IslandLease(const RendezvousAddress& address, int island, std::string token,
                         std::chrono::milliseconds timeout, std::chrono::milliseconds reconnect)
    : client_(address, timeout, reconnect),
      island_(island),
      token_(std::move(token)),
      holder_key_("island/" + std::to_string(island) + "/holder") {
  const std::string id = std::to_string(island_);
  for (int attempt = 0; attempt < kClaimTries; ++attempt) {
    if (client_.run([&] { return claim(); })) {
      heartbeat_ = std::thread([this] { beat_until_stopped(); });
      return;
    }
  }
  throw std::invalid_argument(client_.where() + " refused island " + id + ": " + std::to_string(kClaimTries) +
                              " other jobs took island " + id +
                              " over while this one tried; start one job per island");
}

bool IslandLease::claim() {
  c10d::Store& store = client_.store();
  // Unheld: compare-and-set from absent claims it; otherwise it answers the holder.
  std::string holder = store_text(store.compareSet(holder_key_, {}, store_bytes(token_)));
  if (holder == kReleased)
    holder = store_text(store.compareSet(holder_key_, store_bytes(kReleased), store_bytes(token_)));
  if (holder != token_) {
    if (alive(holder)) {
      const std::string id = std::to_string(island_);
      throw std::invalid_argument(
          client_.where() + " refused island " + id + ": another running job holds island " + id +
          " (its heartbeat moved within the last " + std::to_string(kSilence.count() / 1000) +
          " s); give each island job its own outer.island, or stop the other job first");
    }
    // The holder stopped beating: it is gone, and its id is free to take.
    holder = store_text(store.compareSet(holder_key_, store_bytes(holder), store_bytes(token_)));
  }
  // Held only once kept: a restarted rendezvous must not give the id to a second job.
  client_.persist({holder_key_});
  return store_text(store.get(holder_key_)) == token_;
}

IslandLease::~IslandLease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stopping_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  try {
    client_.store().compareSet(holder_key_, store_bytes(token_), store_bytes(kReleased));
    client_.persist({holder_key_});
  } catch (const std::exception&) {
    // The rendezvous is gone: nothing is held there any more.
  }
}

std::string IslandLease::beat_key(const std::string& holder) const {
  return "island/" + std::to_string(island_) + "/beat/" + holder;
}

bool IslandLease::alive(const std::string& holder) {
  const int64_t before = client_.store().add(beat_key(holder), 0);
  std::this_thread::sleep_for(kSilence);
  return client_.store().add(beat_key(holder), 0) != before;
}

void IslandLease::beat_until_stopped() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stopping_.wait_for(lock, kBeat, [this] { return stop_; })) return;
    }
    try {
      // A restarted rendezvous is waited for (up to its reconnect time, or until the job ends) and
      // beaten at again.
      client_.run([&] { client_.store().add(beat_key(token_), 1); },
                  [this] {
                    std::lock_guard<std::mutex> lock(mutex_);
                    return stop_;
                  });
    } catch (const std::exception&) {
      return;  // the rendezvous is gone for good; the rounds will say so
    }
  }
}

}  // namespace atl::comm
