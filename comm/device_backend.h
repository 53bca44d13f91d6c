// A communication backend whose operations complete on a device, out of the host's sight (NCCL):
// the host only enqueues them. The watchdog polls such a backend every tick, so that its flight
// records close when the device finishes and its asynchronous errors surface, and aborts it on a hang
// so that no kernel stays stuck waiting for a peer that is gone.
#pragma once

#include <string>

namespace atl::comm {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Closes the flight records of the operations the device has completed. Returns "" or one line
  // naming the backend's asynchronous error. Called from the watchdog's thread.
  virtual std::string poll() = 0;
  // Aborts every operation in flight and makes the backend unusable. Called from the watchdog's
  // thread, just before the process exits.
  virtual void abort() = 0;
};

}  // namespace atl::comm
