#include "checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <tuple>

#include "checkpoint/crc32c.h"
#include "checkpoint/remove_tree.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/shard_header.h"
#include "comm/mpi_check.h"

namespace atl::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr uint32_t kFormatVersion = 1;
constexpr const char* kManifest = "manifest.pb";

std::string describe(const proto::Tensor& t) {
  return t.name() + " (" + role_name(t.role()) +
         (t.island() ? ", island " + std::to_string(t.island()) : "") + ")";
}

// What identifies one tensor of a checkpoint.
using TensorKey = std::tuple<std::string, int, int>;  // name, role, island

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw CheckpointError("checkpoint: cannot fsync " + path + ": " + reason);
  }
  ::close(fd);
}

void write_file_synced(const std::string& path, const std::string& bytes) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw CheckpointError("checkpoint: cannot write " + path + ": " + std::strerror(errno));
  }
  fsync_path(path, false);
}

// Rank 0 receives every rank's serialized partial manifest.
std::vector<std::string> gather_to_root(const comm::MpiCommunicator& comm, const std::string& mine) {
  int size = static_cast<int>(mine.size());
  std::vector<int> sizes(comm.size());
  MPI_CHECK(MPI_Gather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm.handle()));
  std::vector<int> displacements(comm.size(), 0);
  for (int r = 1; r < comm.size(); ++r) displacements[r] = displacements[r - 1] + sizes[r - 1];
  std::string all(comm.rank() == 0 ? displacements.back() + sizes.back() : 0, '\0');
  MPI_CHECK(MPI_Gatherv(mine.data(), size, MPI_BYTE, all.data(), sizes.data(), displacements.data(), MPI_BYTE,
                        0, comm.handle()));
  std::vector<std::string> parts;
  if (comm.rank() == 0)
    for (int r = 0; r < comm.size(); ++r) parts.push_back(all.substr(displacements[r], sizes[r]));
  return parts;
}

// Rank 0's outcome, sent to every rank.
void broadcast_outcome(const comm::MpiCommunicator& comm, std::string& error) {
  int length = static_cast<int>(error.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, 0, comm.handle()));
  error.resize(length);
  MPI_CHECK(MPI_Bcast(error.data(), length, MPI_CHAR, 0, comm.handle()));
}

}  // namespace

std::string chunk_key(const std::string& name, proto::Role role, int island,
                      const std::vector<int64_t>& offsets) {
  std::string key = name + ":" + role_name(role) + ":" + std::to_string(island);
  for (int64_t o : offsets) key += ":" + std::to_string(o);
  return key;
}

const char* role_name(proto::Role role) {
  switch (role) {
    case proto::PARAM:
      return "param";
    case proto::EXP_AVG:
      return "exp_avg";
    case proto::EXP_AVG_SQ:
      return "exp_avg_sq";
    case proto::OUTER_PARAM:
      return "outer_param";
    case proto::OUTER_MOMENTUM:
      return "outer_momentum";
    case proto::OUTER_IN_FLIGHT:
      return "outer_in_flight";
    case proto::OUTER_ERROR_FEEDBACK:
      return "outer_error_feedback";
    default:
      return "unspecified";
  }
}

std::string agreed_error(const comm::MpiCommunicator& comm, const std::string& error) {
  int first = error.empty() ? comm.size() : comm.rank();
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm.handle()));
  if (first == comm.size()) return "";
  std::string message = error;
  int length = static_cast<int>(message.size());
  MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, first, comm.handle()));
  message.resize(length);
  MPI_CHECK(MPI_Bcast(message.data(), length, MPI_CHAR, first, comm.handle()));
  return message;
}

CheckpointStore::CheckpointStore(std::string dir, const comm::MpiCommunicator& comm, int keep, int keep_every,
                                 std::optional<FaultPoint> fault)
    : dir_(std::move(dir)),
      comm_(comm),
      keep_(std::max(1, keep)),
      keep_every_(std::max(0, keep_every)),
      fault_(std::move(fault)) {}

void CheckpointStore::remove_partials() const {
  if (comm_.rank() == 0 && fs::is_directory(dir_)) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 8 && name.compare(name.size() - 8, 8, ".partial") == 0)
        remove_tree(e.path().string());
    }
    fs::remove(fs::path(dir_) / "LATEST.tmp");
  }
  MPI_CHECK(MPI_Barrier(comm_.handle()));
}

// Writes this rank's shard into `partial` and describes its chunks.
proto::Manifest CheckpointStore::write_shard(const std::string& partial,
                                             const std::vector<Piece>& pieces) const {
  proto::Manifest mine;
  char file[32];
  std::snprintf(file, sizeof file, "rank-%05d.safetensors", comm_.rank());
  std::vector<NamedTensor> tensors;
  std::vector<std::pair<const Piece*, Box>> boxes;
  for (const Piece& piece : pieces) {
    for (const RunBox& rb : run_boxes(piece.piece, piece.global_shape, piece.begin, piece.end)) {
      tensors.push_back({chunk_key(piece.name, piece.role, piece.island, rb.box.offsets),
                         piece.data.narrow(0, rb.run_offset, rb.box.numel())});
      boxes.emplace_back(&piece, rb.box);
    }
  }
  const WrittenFile shard = write_safetensors((fs::path(partial) / file).string(), tensors);
  proto::ShardHeader* header = mine.add_shard_headers();
  header->set_file(file);
  header->set_length(shard.header_length);
  header->set_crc32c(shard.header_crc32c);
  const std::vector<WrittenTensor>& written = shard.tensors;
  for (size_t i = 0; i < written.size(); ++i) {
    const Piece& piece = *boxes[i].first;
    proto::Tensor* t = mine.add_tensors();
    t->set_name(piece.name);
    t->set_role(piece.role);
    t->set_island(piece.island);
    t->set_dtype(safetensors_dtype(piece.data.scalar_type()));
    for (int64_t d : piece.global_shape) t->add_global_shape(d);
    proto::Chunk* c = t->add_chunks();
    for (int64_t o : boxes[i].second.offsets) c->add_offsets(o);
    for (int64_t s : boxes[i].second.sizes) c->add_sizes(s);
    c->set_file(file);
    c->set_byte_offset(written[i].byte_offset);
    c->set_length(written[i].length);
    c->set_crc32c(written[i].crc32c);
  }
  return mine;
}

std::string CheckpointStore::save(const SaveInfo& info, const std::vector<Piece>& pieces,
                                  const std::string& local_error) const {
  const std::string name = "step-" + std::to_string(info.step);
  const fs::path final_dir = fs::path(dir_) / name, partial = fs::path(dir_) / (name + ".partial");
  std::string error;
  if (comm_.rank() == 0) {
    try {
      remove_tree(partial.string());
      fs::create_directories(partial);
    } catch (const std::exception& e) {
      error = std::string("checkpoint: cannot create ") + partial.string() + ": " + e.what();
    }
  }
  broadcast_outcome(comm_, error);
  if (!error.empty()) throw CheckpointError(error);

  // Every rank: its shard, and the description of its chunks.
  proto::Manifest mine;
  error = local_error;
  if (error.empty()) {
    try {
      mine = write_shard(partial.string(), pieces);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  die_if_fault("write", info.step);
  const std::string failed = agreed_error(comm_, error);
  if (!failed.empty())
    throw CheckpointError(failed + " (saving " + name + "; the previous checkpoint stays in place)");

  // Rank 0: one manifest, written last, then the atomic renames.
  const std::vector<std::string> parts = gather_to_root(comm_, mine.SerializeAsString());
  if (comm_.rank() == 0) {
    try {
      proto::Manifest manifest;
      manifest.set_format_version(kFormatVersion);
      manifest.set_step(info.step);
      manifest.set_tokens(info.tokens);
      manifest.set_seed(info.seed);
      manifest.set_schedule_steps(info.schedule_steps);
      manifest.set_model_config(info.model_config);
      manifest.set_tokenizer(info.tokenizer);
      manifest.set_model_config_hash(std::hash<std::string>{}(info.model_config));
      *manifest.mutable_mesh() = info.mesh;
      std::map<TensorKey, proto::Tensor*> by_tensor;
      for (const std::string& bytes : parts) {
        proto::Manifest part;
        if (!part.ParseFromString(bytes))
          throw CheckpointError("checkpoint: a rank sent an unreadable chunk list");
        for (const proto::Tensor& t : part.tensors()) {
          proto::Tensor*& merged = by_tensor[{t.name(), t.role(), t.island()}];
          if (!merged) {
            merged = manifest.add_tensors();
            *merged = t;
            merged->clear_chunks();
          }
          for (const proto::Chunk& c : t.chunks()) *merged->add_chunks() = c;
        }
        for (const proto::ShardHeader& h : part.shard_headers()) *manifest.add_shard_headers() = h;
      }
      die_if_fault("manifest", info.step);
      write_file_synced((partial / kManifest).string(), manifest.SerializeAsString());
      fsync_path(partial.string(), true);
      remove_tree(final_dir.string());  // a re-save of the same step
      fs::rename(partial, final_dir);
      fsync_path(dir_, true);
      die_if_fault("latest", info.step);
      const std::string latest_tmp = (fs::path(dir_) / "LATEST.tmp").string();
      write_file_synced(latest_tmp, name + "\n");
      fs::rename(latest_tmp, fs::path(dir_) / "LATEST");
      fsync_path(dir_, true);
      prune();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  broadcast_outcome(comm_, error);
  if (!error.empty()) throw CheckpointError(error);
  return final_dir.string();
}

std::vector<std::string> committed_checkpoints(const std::string& store_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (fs::is_directory(store_dir)) {
    const std::regex step_dir("step-([0-9]+)");
    for (const fs::directory_entry& e : fs::directory_iterator(store_dir)) {
      std::smatch m;
      const std::string name = e.path().filename().string();
      if (std::regex_match(name, m, step_dir) && fs::exists(e.path() / kManifest))
        found.emplace_back(std::stoll(m[1].str()), e.path().string());
    }
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> dirs;
  for (const auto& f : found) dirs.push_back(f.second);
  // LATEST names the newest commit; honour it first when it points at a committed checkpoint.
  std::ifstream latest(fs::path(store_dir) / "LATEST");
  std::string named;
  if (latest >> named) {
    const std::string path = (fs::path(store_dir) / named).string();
    auto it = std::find(dirs.begin(), dirs.end(), path);
    if (it != dirs.end()) std::rotate(dirs.begin(), it, it + 1);
  }
  return dirs;
}

std::vector<std::string> CheckpointStore::committed() const {
  return committed_checkpoints(dir_);
}

void CheckpointStore::prune() const {
  const std::vector<std::string> dirs = committed();
  for (size_t i = static_cast<size_t>(keep_); i < dirs.size(); ++i) {
    const int64_t step = std::stoll(fs::path(dirs[i]).filename().string().substr(5));  // step-N
    if (keep_every_ > 0 && step % keep_every_ == 0) continue;
    remove_tree(dirs[i]);
  }
}

// Every shape, box and byte range of a manifest, checked before any of them sizes an allocation or
// indexes a tensor: a damaged manifest that still parses is refused with one line. Each chunk is a
// box inside its tensor's shape, in a file of the checkpoint directory, `length` bytes of fp32.
static void check_geometry(const proto::Manifest& manifest, const std::string& path) {
  constexpr int kMaxDims = 8;
  const auto corrupt = [&path](const proto::Tensor& t, const std::string& problem) {
    return CheckpointDamaged("checkpoint: " + path + " is corrupt: " + describe(t) + " " + problem +
                             "; resume from another checkpoint");
  };
  for (const proto::Tensor& t : manifest.tensors()) {
    if (t.dtype() != "F32") throw corrupt(t, "has dtype " + t.dtype() + ", not F32");
    if (t.global_shape_size() > kMaxDims) throw corrupt(t, "has more than 8 dimensions");
    uint64_t elements = 1;
    for (int64_t d : t.global_shape())
      if (d < 0 || __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements))
        throw corrupt(t, "has an impossible shape");
    for (const proto::Chunk& c : t.chunks()) {
      if (c.offsets_size() != t.global_shape_size() || c.sizes_size() != t.global_shape_size())
        throw corrupt(t, "has a chunk of " + std::to_string(c.sizes_size()) + " dimensions");
      uint64_t chunk_elements = 1;
      for (int d = 0; d < c.sizes_size(); ++d) {
        if (c.offsets(d) < 0 || c.sizes(d) < 0 || c.sizes(d) > t.global_shape(d) - c.offsets(d))
          throw corrupt(t, "has a chunk outside its shape");
        chunk_elements *= static_cast<uint64_t>(c.sizes(d));  // <= elements: no overflow
      }
      if (c.length() != chunk_elements * sizeof(float) || c.byte_offset() > UINT64_MAX - c.length())
        throw corrupt(t, "has a chunk whose byte range does not match its box");
      if (c.file().empty() || fs::path(c.file()).has_parent_path() || c.file() == "." || c.file() == "..")
        throw corrupt(t, "has a chunk in a file outside the checkpoint");
    }
  }
}

proto::Manifest read_manifest(const std::string& checkpoint_dir) {
  const fs::path path = fs::path(checkpoint_dir) / kManifest;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw CheckpointDamaged("checkpoint: " + path.string() +
                            " is missing: the checkpoint was never committed; resume from another one");
  proto::Manifest manifest;
  if (!manifest.ParseFromIstream(&in))
    throw CheckpointDamaged("checkpoint: " + path.string() +
                            " is corrupt (not a manifest); resume from another one");
  if (manifest.format_version() != kFormatVersion)
    throw CheckpointError("checkpoint: " + path.string() + " has format version " +
                          std::to_string(manifest.format_version()) + " but this build reads version " +
                          std::to_string(kFormatVersion) + "; read it with the Atoll version that wrote it");
  check_geometry(manifest, path.string());
  return manifest;
}

void check_chunk_in_file(const std::string& checkpoint_dir, const proto::Tensor& t, const proto::Chunk& c,
                         std::map<std::string, uint64_t>& file_sizes) {
  const std::string path = (fs::path(checkpoint_dir) / c.file()).string();
  auto known = file_sizes.find(c.file());
  if (known == file_sizes.end()) {
    std::error_code error;
    const bool present = fs::is_regular_file(path, error);
    const uint64_t size = present ? fs::file_size(path, error) : 0;
    if (!present || error)
      throw CheckpointDamaged("checkpoint: shard " + path + " is missing (needed for " + describe(t) + ")");
    known = file_sizes.emplace(c.file(), size).first;
  }
  // read_manifest has checked that byte_offset + length does not overflow.
  if (known->second < c.byte_offset() + c.length())
    throw CheckpointDamaged("checkpoint: shard " + path + " is truncated: " + describe(t) +
                            " needs bytes up to " + std::to_string(c.byte_offset() + c.length()) +
                            " but the file has " + std::to_string(known->second));
}

at::Tensor read_chunk(const std::string& checkpoint_dir, const proto::Tensor& t, const proto::Chunk& c) {
  std::map<std::string, uint64_t> file_sizes;
  check_chunk_in_file(checkpoint_dir, t, c, file_sizes);
  const std::string path = (fs::path(checkpoint_dir) / c.file()).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointDamaged("checkpoint: cannot read " + path);
  at::Tensor data = at::empty({static_cast<int64_t>(c.length() / sizeof(float))}, at::kFloat);
  in.seekg(static_cast<std::streamoff>(c.byte_offset()));
  in.read(static_cast<char*>(data.data_ptr()), static_cast<std::streamsize>(c.length()));
  if (!in) throw CheckpointDamaged("checkpoint: cannot read " + path);
  if (crc32c(data.data_ptr(), c.length()) != c.crc32c())
    throw CheckpointDamaged("checkpoint: checksum mismatch in " + path + " for " + describe(t) + " at byte " +
                            std::to_string(c.byte_offset()) + ": the file is corrupt");
  return data;
}

void load_pieces(const std::string& checkpoint_dir, const proto::Manifest& manifest,
                 const std::vector<Piece>& pieces) {
  verify_shard_headers(checkpoint_dir, manifest);
  std::map<TensorKey, const proto::Tensor*> tensors;
  for (const proto::Tensor& t : manifest.tensors()) tensors[{t.name(), t.role(), t.island()}] = &t;
  std::map<std::pair<std::string, uint64_t>, at::Tensor> chunk_data;  // read once per load
  const auto read_cached = [&](const proto::Tensor& t, const proto::Chunk& c) -> at::Tensor {
    const auto key = std::make_pair(c.file(), c.byte_offset());
    if (auto it = chunk_data.find(key); it != chunk_data.end()) return it->second;
    return chunk_data[key] = read_chunk(checkpoint_dir, t, c);
  };

  for (const Piece& piece : pieces) {
    auto found = tensors.find({piece.name, piece.role, piece.island});
    if (found == tensors.end())
      throw CheckpointError("checkpoint: " + checkpoint_dir + " has no " + piece.name + " (" +
                            role_name(piece.role) +
                            (piece.island ? ", island " + std::to_string(piece.island) : "") + ")");
    const proto::Tensor& t = *found->second;
    if (t.dtype() != "F32")
      throw CheckpointError("checkpoint: " + describe(t) + " is " + t.dtype() + ", expected F32");
    if (std::vector<int64_t>(t.global_shape().begin(), t.global_shape().end()) != piece.global_shape)
      throw CheckpointError("checkpoint: " + describe(t) + " in " + checkpoint_dir +
                            " has another shape than the model's; resume with the model it was saved for");
    for (const RunBox& rb : run_boxes(piece.piece, piece.global_shape, piece.begin, piece.end)) {
      const at::Tensor target = piece.data.narrow(0, rb.run_offset, rb.box.numel()).view(rb.box.sizes);
      int64_t covered = 0;
      for (const proto::Chunk& c : t.chunks()) {
        const Box stored{{c.offsets().begin(), c.offsets().end()}, {c.sizes().begin(), c.sizes().end()}};
        const std::optional<Box> common = intersect(rb.box, stored);
        if (!common) continue;
        at::Tensor from = read_cached(t, c).view(stored.sizes), to = target;
        for (size_t d = 0; d < stored.sizes.size(); ++d) {
          from =
              from.narrow(static_cast<int64_t>(d), common->offsets[d] - stored.offsets[d], common->sizes[d]);
          to = to.narrow(static_cast<int64_t>(d), common->offsets[d] - rb.box.offsets[d], common->sizes[d]);
        }
        to.copy_(from);
        covered += common->numel();
      }
      if (covered != rb.box.numel())
        throw CheckpointDamaged("checkpoint: " + checkpoint_dir + " does not hold all of " + describe(t) +
                                ": the checkpoint is incomplete");
    }
  }
}

}  // namespace atl::checkpoint
