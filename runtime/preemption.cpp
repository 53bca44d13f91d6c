#include "runtime/preemption.h"

#include <ATen/ATen.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "comm/communicator.h"

namespace atl::runtime {
namespace {

// A signal handler can touch nothing but lock-free variables of static storage: the one piece of
// process-wide state Atoll keeps (the signal and when it came), written only here and read by
// agreed_signal().
volatile std::sig_atomic_t received_signal = 0;
std::atomic<int64_t> received_at_ns{0};
static_assert(std::atomic<int64_t>::is_always_lock_free, "a signal handler may touch only lock-free atomics");

// One request delivered twice arrives within this: under Slurm every process of a step receives
// scancel's signal, the rank's supervisor (atoll-supervise) and its trainer both, and the
// supervisor passes it on as well. A second request later than this is the user insisting.
constexpr int64_t kSameRequestNs = 1'000'000'000;

int64_t monotonic_ns() {  // clock_gettime is async-signal-safe
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void on_signal(int signal) {
  const int64_t now = monotonic_ns();
  if (received_signal != 0) {
    if (signal == received_signal && now - received_at_ns.load() < kSameRequestNs) return;
    std::signal(signal, SIG_DFL);  // the second request: the user insists
    std::raise(signal);
    return;
  }
  received_at_ns.store(now);
  received_signal = signal;
}

}  // namespace

PreemptionWatch::PreemptionWatch() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGUSR1, &action, &previous_usr1_);
}

PreemptionWatch::~PreemptionWatch() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
}

int PreemptionWatch::agreed_signal(comm::Communicator& world) const {
  at::Tensor flag = at::full({1}, static_cast<int>(received_signal), at::TensorOptions().dtype(at::kInt));
  world.all_reduce(flag, comm::ReduceOp::kMax)->wait();
  return flag.item<int>();
}

}  // namespace atl::runtime
