#include "comm/mesh_shape.h"

#include <stdexcept>

namespace atl::comm {

std::string MeshShape::to_string() const {
  return "islands=" + std::to_string(islands) + " pp=" + std::to_string(pp) + " dp=" + std::to_string(dp) +
         " tp=" + std::to_string(tp) + (cp > 1 ? " cp=" + std::to_string(cp) : "");
}

const char* group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kIsland:
      return "island";
    case GroupKind::kModel:
      return "model";
    case GroupKind::kEmbedding:
      return "embedding";
    case GroupKind::kCp:
      return "cp";
  }
  return "unknown";
}

MeshCoord coord_of(const MeshShape& shape, int rank) {
  if (rank < 0 || rank >= shape.world_size())
    throw std::out_of_range("rank " + std::to_string(rank) + " outside mesh " + shape.to_string());
  MeshCoord c;
  c.tp = rank % shape.tp;
  rank /= shape.tp;
  c.cp = rank % shape.cp;
  rank /= shape.cp;
  c.dp = rank % shape.dp;
  rank /= shape.dp;
  c.pp = rank % shape.pp;
  c.island = rank / shape.pp;
  return c;
}

int rank_of(const MeshShape& shape, const MeshCoord& c) {
  return c.tp + shape.tp * (c.cp + shape.cp * (c.dp + shape.dp * (c.pp + shape.pp * c.island)));
}

std::vector<int> group_members(const MeshShape& shape, GroupKind kind, int rank) {
  const MeshCoord me = coord_of(shape, rank);
  std::vector<int> members;
  auto add = [&](MeshCoord c) { members.push_back(rank_of(shape, c)); };
  switch (kind) {
    case GroupKind::kTp:
      for (int t = 0; t < shape.tp; ++t) add({me.island, me.pp, me.dp, t, me.cp});
      break;
    case GroupKind::kCp:
      for (int c = 0; c < shape.cp; ++c) add({me.island, me.pp, me.dp, me.tp, c});
      break;
    case GroupKind::kDp:  // with the cp ranks, which reduce and shard with dp (rank order: cp fastest)
      for (int d = 0; d < shape.dp; ++d)
        for (int c = 0; c < shape.cp; ++c) add({me.island, me.pp, d, me.tp, c});
      break;
    case GroupKind::kPp:
      for (int p = 0; p < shape.pp; ++p) add({me.island, p, me.dp, me.tp, me.cp});
      break;
    case GroupKind::kIsland:
      for (int i = 0; i < shape.islands; ++i) add({i, me.pp, me.dp, me.tp, me.cp});
      break;
    case GroupKind::kModel:  // rank order: tp fastest, then pp
      for (int p = 0; p < shape.pp; ++p)
        for (int t = 0; t < shape.tp; ++t) add({me.island, p, me.dp, t, me.cp});
      break;
    case GroupKind::kEmbedding:
      if (me.pp != 0 && me.pp != shape.pp - 1) break;
      add({me.island, 0, me.dp, me.tp, me.cp});
      if (shape.pp > 1) add({me.island, shape.pp - 1, me.dp, me.tp, me.cp});
      break;
  }
  return members;
}

}  // namespace atl::comm
