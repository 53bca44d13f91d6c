#include "runtime/preemption.h"

#include <ATen/ATen.h>

#include "comm/communicator.h"

namespace atl::runtime {
namespace {

// A signal handler can touch nothing but a lock-free flag of static storage: the one piece of
// process-wide state Atoll keeps, written only here and read by agreed_signal().
volatile std::sig_atomic_t received_signal = 0;

void on_signal(int signal) {
  if (received_signal != 0) {  // the second one: the user insists
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
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
