// DeviceMesh: this rank's place in the (island, pp, dp, cp, tp) mesh and a communicator for each of
// its groups. Owned by the trainer and passed explicitly -- there are no global process groups.
// See mesh_shape.h for the rank layout and a worked example.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mesh_shape.h"
#include "comm/two_plane_communicator.h"

namespace atl::comm {

class DeviceBackend;
class FlightRecorder;
class MpiCommunicator;

class DeviceMesh {
 public:
  // Collective over `world`. Every group has an MPI plane (control values, CPU tensors); with
  // `cuda_device` >= 0 (this rank's GPU, already bound) also an NCCL plane, bootstrapped over the
  // group's MPI communicator, for CUDA tensors (two_plane_communicator.h). Throws
  // std::invalid_argument when the shape does not cover exactly the launched ranks.
  DeviceMesh(const MpiCommunicator& world, const MeshShape& shape, int cuda_device = -1);
  // Islands as separate jobs: `world` is this island alone (pp*dp*cp*tp ranks); `islands` is this rank's
  // group with the same place in every island of `shape.islands` (over TCP, CPU tensors), and
  // `island` this island's index. Collective over `world`.
  DeviceMesh(const MpiCommunicator& world, const MeshShape& shape, int cuda_device,
             std::unique_ptr<Communicator> islands, int island);
  ~DeviceMesh();
  DeviceMesh(const DeviceMesh&) = delete;
  DeviceMesh& operator=(const DeviceMesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  int rank() const { return rank_; }

  Communicator& tp() const { return *tp_; }
  // The data-parallel reduction group: dp x cp ranks (mesh_shape.h), over which gradients are
  // reduced and ZeRO shards.
  Communicator& dp() const { return *dp_; }
  // The context-parallel group: the ranks holding the chunks of the same sequences (ring attention).
  Communicator& cp() const { return *cp_; }
  Communicator& pp() const { return *pp_; }
  Communicator& island() const { return *island_; }
  Communicator& model() const { return *model_; }
  // Null on ranks that are neither on the first nor on the last pipeline stage.
  Communicator* embedding() const { return embedding_.get(); }
  Communicator& group(GroupKind kind) const;
  // Records every group's operations in `recorder` (see Communicator::record_in).
  void record_in(FlightRecorder* recorder) const;
  // The groups' NCCL planes, for the watchdog to poll and abort (empty on a CPU run).
  std::vector<DeviceBackend*> device_backends() const;

  // Islands as separate jobs with a membership per outer round: this rank's island group becomes
  // `islands` (the round's members at its place). Not while an operation on it runs.
  void replace_island_group(std::unique_ptr<Communicator> islands);

  // Where a rank runs on its node, for the rank table: its index among the node's ranks, how many
  // ranks share the node, its device ("cpu", "cuda:0") and the identity of its GPU (its UUID,
  // "GPU-5a1c..."; empty on the CPU): device indices repeat where each rank sees one GPU, UUIDs do not.
  struct NodePlace {
    int local_rank = -1;
    int local_size = -1;
    std::string device;
    std::string gpu;
  };
  // One row per world rank: host, local rank / ranks on the node, device, coordinates, and last the
  // GPU's identity where it has one. Collective (gathers every rank's `here`); the text is complete on
  // rank 0.
  std::string rank_table(const MpiCommunicator& world, const NodePlace& here) const;

 private:
  std::vector<TwoPlaneCommunicator*> groups() const;  // those this rank is in

  MeshShape shape_;
  MeshCoord coord_;
  int rank_ = 0;
  std::unique_ptr<TwoPlaneCommunicator> tp_, dp_, cp_, pp_, island_, model_, embedding_;
};

}  // namespace atl::comm
