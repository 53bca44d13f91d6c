// Preemption (SIGTERM, SIGUSR1 from Slurm, a scheduler or `atoll launch`): the signal only sets a
// flag; once per step every rank contributes its flag to a max over the world, so all ranks see the
// request at the same step, finish it, commit a checkpoint and exit 0.
#pragma once

#include <csignal>

namespace atl::comm {
class Communicator;
}

namespace atl::runtime {

class PreemptionWatch {
 public:
  // Installs the handlers (a second signal while one is pending kills the process the default way,
  // so a stuck job can still be stopped -- unless it is the same signal within a second: one request
  // delivered twice, as Slurm and a rank's supervisor do); the destructor restores the previous handlers.
  PreemptionWatch();
  ~PreemptionWatch();
  PreemptionWatch(const PreemptionWatch&) = delete;
  PreemptionWatch& operator=(const PreemptionWatch&) = delete;

  // The signal any rank of `world` received (0: none). Collective over `world`: 4 bytes.
  int agreed_signal(comm::Communicator& world) const;

 private:
  struct sigaction previous_term_ {
  }, previous_usr1_{};
};

}  // namespace atl::runtime
