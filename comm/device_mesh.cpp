#include "comm/device_mesh.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "atoll/build_config.h"
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#if ATOLL_CUDA
#include "comm/nccl_communicator.h"
#include "comm/single_rank_communicator.h"
#endif

namespace atl::comm {
namespace {

std::unique_ptr<TwoPlaneCommunicator> split_group(const MpiCommunicator& world, const MeshShape& shape,
                                                  GroupKind kind, int cuda_device) {
  const std::vector<int> members = group_members(shape, kind, world.rank());
  // The smallest member names the group; key = world rank keeps group ranks in mesh order.
  const int color = members.empty() ? MPI_UNDEFINED : members.front();
  MPI_Comm sub;
  MPI_CHECK(MPI_Comm_split(world.handle(), color, world.rank(), &sub));
  if (sub == MPI_COMM_NULL) return nullptr;
  auto control = std::make_unique<MpiCommunicator>(world.runtime(), sub, group_name(kind));
  std::unique_ptr<Communicator> device;
  if (cuda_device >= 0) {
#if ATOLL_CUDA
    // A group of one has nothing to exchange: no NCCL communicator (each costs an initialisation,
    // GPU memory and a proxy thread); its collectives leave the data as it is, the bits NCCL's
    // would leave.
    if (control->size() == 1)
      device = std::make_unique<SingleRankCommunicator>(group_name(kind));
    else
      device = std::make_unique<NcclCommunicator>(*control, cuda_device, group_name(kind));
#else
    throw std::invalid_argument(
        "parallel: CUDA device " + std::to_string(cuda_device) +
        " asked for, but this build has no CUDA path; rebuild with -DATOLL_WITH_CUDA=ON");
#endif
  }
  return std::make_unique<TwoPlaneCommunicator>(std::move(control), std::move(device));
}

}  // namespace

DeviceMesh::DeviceMesh(const MpiCommunicator& world, const MeshShape& shape, int cuda_device)
    : shape_(shape), rank_(world.rank()) {
  if (shape.islands < 1 || shape.pp < 1 || shape.dp < 1 || shape.tp < 1 || shape.cp < 1)
    throw std::invalid_argument("parallel: every mesh dimension must be >= 1, got " + shape.to_string());
  if (shape.world_size() != world.size())
    throw std::invalid_argument(std::string("parallel: islands*pp*dp*tp") + (shape.cp > 1 ? "*cp" : "") +
                                " = " + std::to_string(shape.world_size()) + " but " +
                                std::to_string(world.size()) +
                                " ranks were launched; launch that many ranks or change the layout");
  coord_ = coord_of(shape, rank_);
  tp_ = split_group(world, shape, GroupKind::kTp, cuda_device);
  dp_ = split_group(world, shape, GroupKind::kDp, cuda_device);
  cp_ = split_group(world, shape, GroupKind::kCp, cuda_device);
  pp_ = split_group(world, shape, GroupKind::kPp, cuda_device);
  // The islands exchange host copies over MPI (optim/outer/island_exchange.h), as separate island jobs
  // do over TCP: their group has no NCCL plane, so islands of one rank each need no NCCL between ranks
  // and may share one GPU (runtime/device.h).
  island_ = split_group(world, shape, GroupKind::kIsland, -1);
  model_ = split_group(world, shape, GroupKind::kModel, cuda_device);
  embedding_ = split_group(world, shape, GroupKind::kEmbedding, cuda_device);
}

DeviceMesh::DeviceMesh(const MpiCommunicator& world, const MeshShape& shape, int cuda_device,
                       std::unique_ptr<Communicator> islands, int island)
    : DeviceMesh(world, MeshShape{1, shape.pp, shape.dp, shape.tp, shape.cp}, cuda_device) {
  if (island < 0 || island >= shape.islands || islands->size() > shape.islands)
    throw std::invalid_argument("parallel: island " + std::to_string(island) + " of a group of " +
                                std::to_string(islands->size()) +
                                " is outside parallel.islands = " + std::to_string(shape.islands));
  shape_ = shape;
  coord_.island = island;
  island_ = std::make_unique<TwoPlaneCommunicator>(std::move(islands), nullptr);
}

DeviceMesh::~DeviceMesh() = default;

Communicator& DeviceMesh::group(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTp:
      return *tp_;
    case GroupKind::kDp:
      return *dp_;
    case GroupKind::kCp:
      return *cp_;
    case GroupKind::kPp:
      return *pp_;
    case GroupKind::kIsland:
      return *island_;
    case GroupKind::kModel:
      return *model_;
    case GroupKind::kEmbedding:
      if (!embedding_)
        throw std::logic_error("rank " + std::to_string(rank_) + " is not in an embedding group");
      return *embedding_;
  }
  throw std::logic_error("unknown group kind");
}

std::vector<TwoPlaneCommunicator*> DeviceMesh::groups() const {
  std::vector<TwoPlaneCommunicator*> out;
  for (TwoPlaneCommunicator* group :
       {tp_.get(), dp_.get(), cp_.get(), pp_.get(), island_.get(), model_.get(), embedding_.get()})
    if (group) out.push_back(group);
  return out;
}

void DeviceMesh::record_in(FlightRecorder* recorder) const {
  for (TwoPlaneCommunicator* group : groups()) group->record_in(recorder);
}

std::vector<DeviceBackend*> DeviceMesh::device_backends() const {
  std::vector<DeviceBackend*> backends;
  for (const TwoPlaneCommunicator* group : groups())
    if (group->device_backend()) backends.push_back(group->device_backend());
  return backends;
}

void DeviceMesh::replace_island_group(std::unique_ptr<Communicator> islands) {
  island_->replace_control(std::move(islands));
}

std::string DeviceMesh::rank_table(const MpiCommunicator& world, const NodePlace& here) const {
  // Each rank's host, device and GPU as fixed-size text, its local rank and node size as two ints.
  constexpr size_t kHostLen = 64, kDeviceLen = 16, kGpuLen = 96, kRecord = kHostLen + kDeviceLen + kGpuLen;
  char mine[kRecord] = {};
  gethostname(mine, kHostLen - 1);
  here.device.copy(mine + kHostLen, kDeviceLen - 1);
  here.gpu.copy(mine + kHostLen + kDeviceLen, kGpuLen - 1);
  const int local[2] = {here.local_rank, here.local_size};
  const size_t ranks = static_cast<size_t>(world.size());
  std::vector<char> records(kRecord * ranks);
  std::vector<int> locals(2 * ranks);
  MPI_CHECK(MPI_Gather(mine, kRecord, MPI_CHAR, records.data(), kRecord, MPI_CHAR, 0, world.handle()));
  MPI_CHECK(MPI_Gather(local, 2, MPI_INT, locals.data(), 2, MPI_INT, 0, world.handle()));
  if (world.rank() != 0) return {};
  // The cp column only where there is context parallelism: other layouts keep their table unchanged.
  const bool cp = shape_.cp > 1;
  std::string table = std::string("rank  host                  local  device    island  pp  dp  tp") +
                      (cp ? "  cp" : "") + "  gpu\n";
  char line[200];
  // `world` holds every island, or (islands as separate jobs) only this one: then its ranks are laid
  // out as one island and carry this island's index.
  const bool one_island = world.size() < shape_.world_size();
  const MeshShape laid_out = one_island ? MeshShape{1, shape_.pp, shape_.dp, shape_.tp, shape_.cp} : shape_;
  for (size_t r = 0; r < ranks; ++r) {
    MeshCoord c = coord_of(laid_out, static_cast<int>(r));
    if (one_island) c.island = coord_.island;
    const std::string on_node = std::to_string(locals[2 * r]) + "/" + std::to_string(locals[2 * r + 1]);
    std::snprintf(line, sizeof line, "%4zu  %-20.20s  %5s  %-8.8s  %6d  %2d  %2d  %2d", r,
                  &records[r * kRecord], on_node.c_str(), &records[r * kRecord + kHostLen], c.island, c.pp,
                  c.dp, c.tp);
    table += line;
    if (cp) {
      std::snprintf(line, sizeof line, "  %2d", c.cp);
      table += line;
    }
    const std::string gpu = &records[r * kRecord + kHostLen + kDeviceLen];
    table += (gpu.empty() ? "" : "  " + gpu) + "\n";
  }
  return table;
}

}  // namespace atl::comm
