// Megatron's .bin/.idx written in tests as megatron-core's _IndexWriter writes them
// (runtime/data/megatron_shard.h describes the format).
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace atl::test {

// The fields of a Megatron index.
struct MegatronIndex {
  uint8_t code = 8;  // uint16
  std::vector<int32_t> sizes;
  std::vector<int64_t> documents;  // sequence indices, 0 .. sizes.size()
  uint64_t version = 1;
  std::string magic = std::string("MMIDIDX\0\0", 9);

  int64_t token_bytes() const { return code == 8 ? 2 : 4; }

  std::string bytes() const {
    std::string out = magic;
    const auto put = [&](const auto& value) {
      out.append(reinterpret_cast<const char*>(&value), sizeof value);
    };
    put(version);
    put(code);
    put(static_cast<uint64_t>(sizes.size()));
    put(static_cast<uint64_t>(documents.size()));
    for (int32_t s : sizes) put(s);
    int64_t pointer = 0;
    for (int32_t s : sizes) {
      put(pointer);
      pointer += s * token_bytes();
    }
    for (int64_t d : documents) put(d);
    return out;
  }
};

// PREFIX.idx from `index` and PREFIX.bin of `tokens` (at the index's width); returns PREFIX.bin.
inline std::string write_megatron_shard(const std::string& prefix, const MegatronIndex& index,
                                        const std::vector<uint32_t>& tokens) {
  std::ofstream(prefix + ".idx", std::ios::binary) << index.bytes();
  std::string body;
  for (uint32_t t : tokens) body.append(reinterpret_cast<const char*>(&t), index.token_bytes());
  std::ofstream(prefix + ".bin", std::ios::binary) << body;
  return prefix + ".bin";
}

// `tokens` as a Megatron shard of one sequence per document, the documents `lengths` long in turn
// (cycling through them; the last one takes what is left); returns PREFIX.bin.
inline std::string write_megatron_documents(const std::string& prefix, const std::vector<uint32_t>& tokens,
                                            const std::vector<int32_t>& lengths) {
  MegatronIndex index;
  int64_t written = 0;
  for (size_t d = 0; written < static_cast<int64_t>(tokens.size()); ++d) {
    const int64_t left = static_cast<int64_t>(tokens.size()) - written;
    const int32_t length = static_cast<int32_t>(std::min<int64_t>(lengths[d % lengths.size()], left));
    index.documents.push_back(static_cast<int64_t>(index.sizes.size()));
    index.sizes.push_back(length);
    written += length;
  }
  index.documents.push_back(static_cast<int64_t>(index.sizes.size()));
  return write_megatron_shard(prefix, index, tokens);
}

}  // namespace atl::test
