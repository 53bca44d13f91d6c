#include "checkpoint/shard_header.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_store.h"
#include "checkpoint/crc32c.h"

namespace atl::checkpoint {
namespace fs = std::filesystem;
namespace {

void verify_one(const std::string& checkpoint_dir, const proto::Manifest& manifest,
                const proto::ShardHeader& h) {
  const std::string path = (fs::path(checkpoint_dir) / h.file()).string();
  const auto damaged = [&path](const std::string& problem) {
    return CheckpointDamaged("checkpoint: shard " + path + ": " + problem +
                             "; the file is damaged: resume from another checkpoint (auto does)");
  };
  if (fs::path(h.file()).has_parent_path())
    throw damaged("the manifest names a shard outside the checkpoint");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointDamaged("checkpoint: shard " + path + " is missing");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char length_bytes[8] = {};
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  if (!in) throw damaged("it is shorter than a safetensors header");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | length_bytes[i];
  if (length != h.length())
    throw damaged("its header length is " + std::to_string(length) + " bytes but the manifest recorded " +
                  std::to_string(h.length()));
  if (8 + length > size) throw damaged("it is truncated in its header");
  std::string json(length, '\0');
  in.read(json.data(), static_cast<std::streamsize>(length));
  if (!in) throw damaged("its header cannot be read");
  if (crc32c(json.data(), json.size(), crc32c(length_bytes, 8)) != h.crc32c())
    throw damaged("its safetensors header fails the manifest's checksum");
  nlohmann::json entries;
  try {
    entries = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception&) {
    throw damaged("its header is not JSON");
  }
  for (const proto::Tensor& t : manifest.tensors())
    for (const proto::Chunk& c : t.chunks()) {
      if (c.file() != h.file()) continue;
      const std::string key = chunk_key(t.name(), t.role(), static_cast<int>(t.island()),
                                        std::vector<int64_t>(c.offsets().begin(), c.offsets().end()));
      const auto entry = entries.find(key);
      if (entry == entries.end() || !entry->is_object()) throw damaged("its header has no entry " + key);
      const uint64_t begin = c.byte_offset() - 8 - length;
      const nlohmann::json expected_offsets = {begin, begin + c.length()};
      if (entry->value("dtype", nlohmann::json()) != t.dtype() ||
          entry->value("data_offsets", nlohmann::json()) != expected_offsets)
        throw damaged("its header says " + key + " is " + entry->dump() + " but the manifest says dtype " +
                      t.dtype() + " at bytes " + expected_offsets.dump());
    }
}

}  // namespace

void verify_shard_headers(const std::string& checkpoint_dir, const proto::Manifest& manifest) {
  for (const proto::ShardHeader& h : manifest.shard_headers()) verify_one(checkpoint_dir, manifest, h);
}

}  // namespace atl::checkpoint
