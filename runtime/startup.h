// The start-up agreement across ranks. Each rank first runs its own checks (config, layout, data
// files, initial weights) without any collective, so a rank that fails cannot leave its peers waiting
// in one; then the ranks agree: the lowest failing rank reports its problem and every other rank stops
// quietly.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

namespace atl::comm {
class MpiCommunicator;
}  // namespace atl::comm

namespace atl::runtime {

// Thrown on the ranks whose own start-up checks passed when another rank's failed: that rank
// reports the problem, the others exit non-zero without repeating it.
class PeerFailure : public std::runtime_error {
 public:
  explicit PeerFailure(int failed_rank);
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// A rank's own start-up check failed (its data, its initial weights): bad input, not a crash.
class StartupError : public std::runtime_error {
 public:
  explicit StartupError(const std::string& message);
};

// A start-up finding every rank reached together (an agreement over all of them): the same line on
// every rank, so rank 0 says it once.
class AgreedStartupError : public StartupError {
 public:
  using StartupError::StartupError;
};

// Runs `local_checks` on this rank, then agrees with every rank of `world` (collective). When some
// rank's checks threw, the lowest such rank rethrows its error (a ConfigError as it is, anything else
// as a StartupError) and every other rank throws PeerFailure.
void agree_on_startup(const comm::MpiCommunicator& world, const std::function<void()>& local_checks);

}  // namespace atl::runtime
