#include "comm/device_mesh.h"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"

namespace atl::comm {
namespace {

std::unique_ptr<MpiCommunicator> split_group(const MpiCommunicator& world, const MeshShape& shape,
                                             GroupKind kind) {
  const std::vector<int> members = group_members(shape, kind, world.rank());
  // The smallest member names the group; key = world rank keeps group ranks in mesh order.
  const int color = members.empty() ? MPI_UNDEFINED : members.front();
  MPI_Comm sub;
  MPI_CHECK(MPI_Comm_split(world.handle(), color, world.rank(), &sub));
  if (sub == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiCommunicator>(world.runtime(), sub, group_name(kind));
}

}  // namespace

DeviceMesh::DeviceMesh(const MpiCommunicator& world, const MeshShape& shape)
    : shape_(shape), rank_(world.rank()) {
  if (shape.islands < 1 || shape.pp < 1 || shape.dp < 1 || shape.tp < 1)
    throw std::invalid_argument("parallel: every mesh dimension must be >= 1, got " + shape.to_string());
  if (shape.world_size() != world.size())
    throw std::invalid_argument("parallel: islands*pp*dp*tp = " + std::to_string(shape.world_size()) +
                                " but " + std::to_string(world.size()) +
                                " ranks were launched; launch that many ranks or change the layout");
  coord_ = coord_of(shape, rank_);
  tp_ = split_group(world, shape, GroupKind::kTp);
  dp_ = split_group(world, shape, GroupKind::kDp);
  pp_ = split_group(world, shape, GroupKind::kPp);
  island_ = split_group(world, shape, GroupKind::kIsland);
  model_ = split_group(world, shape, GroupKind::kModel);
  embedding_ = split_group(world, shape, GroupKind::kEmbedding);
}

DeviceMesh::~DeviceMesh() = default;

Communicator& DeviceMesh::group(GroupKind kind) const {
  switch (kind) {
    case GroupKind::kTp:
      return *tp_;
    case GroupKind::kDp:
      return *dp_;
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

void DeviceMesh::record_in(FlightRecorder* recorder) const {
  for (Communicator* group : {tp_.get(), dp_.get(), pp_.get(), island_.get(), model_.get(), embedding_.get()})
    if (group) group->record_in(recorder);
}

std::string DeviceMesh::rank_table(const MpiCommunicator& world) const {
  constexpr int kHostLen = 64;
  char host[kHostLen] = {};
  gethostname(host, kHostLen - 1);
  std::vector<char> hosts(static_cast<size_t>(kHostLen) * world.size());
  MPI_CHECK(MPI_Gather(host, kHostLen, MPI_CHAR, hosts.data(), kHostLen, MPI_CHAR, 0, world.handle()));
  if (world.rank() != 0) return {};
  std::string table = "rank  host                  island  pp  dp  tp\n";
  char line[160];
  for (int r = 0; r < world.size(); ++r) {
    const MeshCoord c = coord_of(shape_, r);
    std::snprintf(line, sizeof line, "%4d  %-20.20s  %6d  %2d  %2d  %2d\n", r,
                  &hosts[static_cast<size_t>(r) * kHostLen], c.island, c.pp, c.dp, c.tp);
    table += line;
  }
  return table;
}

}  // namespace atl::comm
