// A directory of checkpoints (DESIGN §7): `step-N/` per committed checkpoint (one safetensors shard
// per rank plus `manifest.pb`, written last), `LATEST` naming the newest. A save is collective:
// every rank writes its shard into `step-N.partial/`, rank 0 gathers the chunk descriptions,
// writes the manifest, fsyncs, renames the directory to `step-N/` and replaces LATEST atomically.
// A crash at any moment leaves the previous committed checkpoint intact and chosen; `.partial`
// leftovers are removed at start-up. The collective runs on a communicator of its own, never the
// training one.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/box.h"
#include "checkpoint/checkpoint_error.h"
#include "checkpoint/fault_injection.h"
#include "checkpoint/manifest.pb.h"
#include "comm/mpi_communicator.h"
#include "text/one_line.h"

namespace atl::checkpoint {

// A run of one tensor that this rank holds: `begin`..`end` of the row-major elements of `piece`, a
// box of the global tensor (its rows may run past `global_shape`: vocabulary padding, not saved).
// `data` (fp32, contiguous, end - begin elements) is read on save and written on load.
struct Piece {
  std::string name;
  proto::Role role = proto::PARAM;
  int island = 0;  // islands: whose copy
  std::vector<int64_t> global_shape;
  Box piece;
  int64_t begin = 0, end = 0;
  at::Tensor data;
};

// What a manifest records besides the tensors.
// The committed checkpoints of the store at `store_dir` (directories step-N with a manifest), newest
// first, LATEST's first where it names one of them.
std::vector<std::string> committed_checkpoints(const std::string& store_dir);

struct SaveInfo {
  int64_t step = 0, tokens = 0, seed = 0;
  int64_t schedule_steps = 0;  // the learning-rate schedule's length (train.steps)
  std::string model_config;    // the model section as YAML
  std::string tokenizer;       // serialized SentencePiece model; empty: bytes
  proto::Mesh mesh;
};

class CheckpointStore {
 public:
  // `comm`: a communicator of the checkpointing ranks for this store alone. `keep`: committed
  // checkpoints kept (>= 1; the newest is never deleted); `keep_every` (> 0): also keep those whose
  // step is a multiple of it.
  // `fault`: the checkpoint tests' fault point (fault_injection.h), none in real runs.
  CheckpointStore(std::string dir, const comm::MpiCommunicator& comm, int keep, int keep_every = 0,
                  std::optional<FaultPoint> fault = std::nullopt);

  const std::string& dir() const { return dir_; }
  // Rank 0 removes `*.partial` leftovers of interrupted saves. Collective.
  void remove_partials() const;
  // Collective: saves and commits; returns the committed directory. Throws CheckpointError on every
  // rank if any rank failed (nothing is committed then). `local_error`: this rank already failed
  // (e.g. taking its snapshot) and only takes part in the agreement.
  std::string save(const SaveInfo& info, const std::vector<Piece>& pieces,
                   const std::string& local_error = "") const;
  // Committed checkpoints (directories step-N with a manifest), newest first.
  std::vector<std::string> committed() const;
  // Test hook (fault_injection.h): exits here if the fault point names this phase and step.
  void die_if_fault(const char* phase, int64_t step) const {
    checkpoint::die_if_fault(fault_, phase, step, comm_.rank());
  }

 private:
  void prune() const;
  proto::Manifest write_shard(const std::string& partial, const std::vector<Piece>& pieces) const;

  std::string dir_;
  const comm::MpiCommunicator& comm_;
  int keep_, keep_every_;
  std::optional<FaultPoint> fault_;
};

// Agreement over `comm` after each rank tried something: every rank gets the lowest failing rank's
// `error`, or an empty string when every rank's was empty. Collective.
std::string agreed_error(const comm::MpiCommunicator& comm, const std::string& error);

// "param", "exp_avg", "exp_avg_sq".
const char* role_name(proto::Role role);
// The name a chunk is stored under in its shard's safetensors header: "NAME:ROLE:ISLAND:OFFSETS...".
std::string chunk_key(const std::string& name, proto::Role role, int island,
                      const std::vector<int64_t>& offsets);

// Reads and parses DIR/manifest.pb; CheckpointError when missing or corrupt.
proto::Manifest read_manifest(const std::string& checkpoint_dir);
// CheckpointError naming the file and tensor unless the chunk's bytes lie within its shard file.
// `file_sizes` caches each file's size across calls.
void check_chunk_in_file(const std::string& checkpoint_dir, const proto::Tensor& tensor,
                         const proto::Chunk& chunk, std::map<std::string, uint64_t>& file_sizes);
// One chunk's data (fp32), checked against its CRC-32C; CheckpointError naming the file and tensor
// on a missing or short file or a checksum mismatch.
at::Tensor read_chunk(const std::string& checkpoint_dir, const proto::Tensor& tensor,
                      const proto::Chunk& chunk);
// Fills every piece's data from the checkpoint, reading only the chunks that intersect it and
// checking each chunk's CRC-32C; CheckpointError naming the file and tensor on a missing or short
// file, a checksum mismatch, or a tensor the checkpoint does not cover.
void load_pieces(const std::string& checkpoint_dir, const proto::Manifest& manifest,
                 const std::vector<Piece>& pieces);

}  // namespace atl::checkpoint
