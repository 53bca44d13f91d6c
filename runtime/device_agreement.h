// The device kind, agreed by every rank before anything device-specific (binding, NCCL). Under
// run.device auto each rank chooses from what it sees, so a node without GPUs (mpirun with a
// hostfile, no GPU variables) falls back to the CPU while the others choose CUDA, and the job would
// then wait in NCCL's set-up until the watchdog: instead every rank stops with one line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace atl::comm {
class MpiCommunicator;
}  // namespace atl::comm

namespace atl::runtime {

// One rank's choice as the agreement gathers it.
struct RankDeviceKind {
  std::string host;
  bool cuda = false;
  std::string cpu_reason;  // DeviceChoice::cpu_reason
};

// Where `ranks` (in world-rank order) did not all choose the same kind, the line that says so: the
// ranks and hosts on each side, the reason of each host that chose the CPU, and the fix, e.g.
// "run.device auto chose cuda on ranks 0-1 (node-a) and cpu on rank 2 (node-b: no CUDA device is
// visible to this rank); give every rank a GPU or set run.device: cpu". nullopt where they agree.
std::optional<std::string> device_kind_mismatch(const std::vector<RankDeviceKind>& ranks);

// Gathers every rank's `choice` (made on `host`) over `world` and throws AgreedStartupError with
// device_kind_mismatch's line on every rank where they differ. Collective.
void agree_on_device_kind(const comm::MpiCommunicator& world, const DeviceChoice& choice,
                          const std::string& host);

}  // namespace atl::runtime
