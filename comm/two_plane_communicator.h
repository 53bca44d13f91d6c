// A mesh group's two planes: MPI for control values and CPU tensors (always; for islands in
// separate jobs, the island group's Gloo over TCP instead), NCCL for CUDA tensors (on CUDA runs). Every
// operation goes to the plane of its tensors' device, so callers name a group (dp, tp, ...) and never a
// backend; both planes count into the group's one set of byte counters and record into the same flight
// recorder under the group's label.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace atl::comm {

class DeviceBackend;

class TwoPlaneCommunicator final : public Communicator {
 public:
  // `device` may be null (a CPU run): then every operation goes to `control`.
  TwoPlaneCommunicator(std::unique_ptr<Communicator> control, std::unique_ptr<Communicator> device);
  ~TwoPlaneCommunicator() override;

  int rank() const override;
  int size() const override;
  const std::string& name() const override;

  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr reduce_scatter(const at::Tensor& input, const at::Tensor& output, ReduceOp op) override;
  WorkPtr all_gather(const at::Tensor& input, const at::Tensor& output) override;
  WorkPtr broadcast(const at::Tensor& tensor, int root) override;
  // Every leg must be on one plane (a pipeline's sends and receives share the activation's device).
  WorkPtr batch_p2p(const std::vector<P2POp>& ops) override;
  void barrier() override;                                     // on the control plane
  void connect_peers(const std::vector<int>& peers) override;  // on the device plane
  std::shared_ptr<void> progress_in_background() override;
  void record_in(FlightRecorder* recorder) override;

  // Islands whose membership changes per outer round: the round's group replaces the control plane
  // (same counters, same recorder; the label becomes the new group's). Not while an operation runs.
  void replace_control(std::unique_ptr<Communicator> control);

  // The NCCL plane as the watchdog sees it; null on a CPU run.
  DeviceBackend* device_backend() const;

 private:
  Communicator& plane_of(const at::Tensor& tensor) const;

  std::unique_ptr<Communicator> control_;
  std::unique_ptr<Communicator> device_;
};

}  // namespace atl::comm
