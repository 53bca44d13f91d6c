// Mesh arithmetic, free of MPI so it can be unit-tested: the mapping between a world rank and its
// coordinates, and the members of every group.
//
// Dimensions, outermost first: island, pp, dp, cp, tp. TP varies fastest so TP peers share a node,
// and context-parallel (cp) peers, which pass K/V around their ring in every attention, come next:
//   rank = tp + TP * (cp + CP * (dp + DP * (pp + PP * island)))
// Worked example, islands=1, pp=2, dp=2, tp=2, cp=1 (8 ranks):
//   rank:    0 1 2 3 4 5 6 7
//   pp:      0 0 0 0 1 1 1 1
//   dp:      0 0 1 1 0 0 1 1
//   tp:      0 1 0 1 0 1 0 1
//   tp groups [0,1] [2,3] [4,5] [6,7];   dp groups [0,2] [1,3] [4,6] [5,7]
//   pp groups [0,4] [1,5] [2,6] [3,7];   model (tp x pp) groups [0,1,4,5] [2,3,6,7]
//   embedding (first and last stage) groups = pp groups here, since pp = 2.
// The cp group links the ranks that hold the chunks of the same sequences. They reduce gradients
// and shard ZeRO state together with the data-parallel ranks, so the dp group holds dp x cp ranks
// (cp fastest): with dp=2, cp=2, tp=1 the cp groups are [0,1] [2,3] and the dp group [0,1,2,3].
// The island group links the ranks with the same (pp, dp, cp, tp) in every island: the outer optimizer's.
#pragma once

#include <string>
#include <vector>

namespace atl::comm {

struct MeshShape {
  int islands = 1;
  int pp = 1;
  int dp = 1;
  int tp = 1;
  int cp = 1;  // last, so that {islands, pp, dp, tp} keeps its meaning
  int world_size() const { return islands * pp * dp * tp * cp; }
  std::string to_string() const;
};

struct MeshCoord {
  int island = 0;
  int pp = 0;
  int dp = 0;
  int tp = 0;
  int cp = 0;
};

enum class GroupKind { kTp, kDp, kPp, kIsland, kModel, kEmbedding, kCp };
const char* group_name(GroupKind kind);

MeshCoord coord_of(const MeshShape& shape, int rank);
int rank_of(const MeshShape& shape, const MeshCoord& coord);

// World ranks of the group of `kind` that contains `rank`, in group-rank order; empty for the
// embedding group of a rank that is neither on the first nor on the last pipeline stage.
std::vector<int> group_members(const MeshShape& shape, GroupKind kind, int rank);

}  // namespace atl::comm
