#include "comm/island_lease.h"

#include <stdexcept>
#include <vector>

#include "comm/island_rendezvous.h"

namespace atl::comm {
namespace {

constexpr const char* kReleased = "released";
constexpr int kClaimTries = 3;  // a takeover can lose a race with another successor

}  // namespace

IslandLease::IslandLease(const RendezvousAddress& address, int island, std::string token,
                         std::chrono::milliseconds timeout)
    : store_(connect_rendezvous(address, timeout)),
      where_(rendezvous_name(address)),
      island_(island),
      token_(std::move(token)),
      holder_key_("island/" + std::to_string(island) + "/holder") {
  const std::string id = std::to_string(island_);
  for (int attempt = 0; attempt < kClaimTries; ++attempt) {
    // Unheld: compare-and-set from absent claims it; otherwise it answers the holder.
    std::string holder = store_text(store_->compareSet(holder_key_, {}, store_bytes(token_)));
    if (holder == kReleased)
      holder = store_text(store_->compareSet(holder_key_, store_bytes(kReleased), store_bytes(token_)));
    if (holder == token_) {
      heartbeat_ = std::thread([this] { beat_until_stopped(); });
      return;
    }
    if (alive(holder))
      throw std::invalid_argument(
          where_ + " refused island " + id + ": another running job holds island " + id +
          " (its heartbeat moved within the last " + std::to_string(kSilence.count() / 1000) +
          " s); give each island job its own outer.island, or stop the other job first");
    // The holder stopped beating: it is gone, and its id is free to take.
    store_->compareSet(holder_key_, store_bytes(holder), store_bytes(token_));
  }
  throw std::invalid_argument(where_ + " refused island " + id + ": " + std::to_string(kClaimTries) +
                              " other jobs took island " + id +
                              " over while this one tried; start one job per island");
}

IslandLease::~IslandLease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stopping_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  try {
    store_->compareSet(holder_key_, store_bytes(token_), store_bytes(kReleased));
  } catch (const std::exception&) {
    // The rendezvous is gone: nothing is held there any more.
  }
}

std::string IslandLease::beat_key(const std::string& holder) const {
  return "island/" + std::to_string(island_) + "/beat/" + holder;
}

bool IslandLease::alive(const std::string& holder) {
  const int64_t before = store_->add(beat_key(holder), 0);
  std::this_thread::sleep_for(kSilence);
  return store_->add(beat_key(holder), 0) != before;
}

void IslandLease::beat_until_stopped() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_.wait_for(lock, kBeat, [this] { return stop_; })) {
    try {
      store_->add(beat_key(token_), 1);
    } catch (const std::exception&) {
      return;  // the rendezvous is gone; the rounds will say so
    }
  }
}

}  // namespace atl::comm
