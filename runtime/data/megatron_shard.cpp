#include "runtime/data/megatron_shard.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/data/token_span.h"

#include "runtime/data/shard.h"

namespace atl::runtime {
namespace {

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;
// Megatron's DType codes of token types Atoll reads: what its preprocess_data.py writes (uint16
// below 65,500 ids, int32 above).
constexpr uint8_t kUint16 = 8, kInt32 = 4;
constexpr const char* kRewrite = "; write it again with Megatron's tools/preprocess_data.py";

}  // namespace

std::string megatron_index_path(const std::string& bin_path) {
  const bool bin = bin_path.size() > 4 && bin_path.ends_with(".bin");
  return (bin ? bin_path.substr(0, bin_path.size() - 4) : bin_path) + ".idx";
}

MegatronShard::MegatronShard(const std::string& bin_path)
    : path_(bin_path), index_path_(megatron_index_path(bin_path)), bin_(bin_path), index_(index_path_) {
  const unsigned char* idx = index_.bytes();
  const std::string& ip = index_path_;
  if (index_.size() < kIndexHeaderBytes)
    shard_error(ip, "holds " + std::to_string(index_.size()) +
                        " bytes, less than the 34-byte Megatron index header" + kRewrite);
  if (std::memcmp(idx, kIndexMagic, sizeof kIndexMagic) != 0)
    shard_error(ip, "does not start with MMIDIDX; is it a Megatron index (.idx)?");
  const auto version = load_unaligned<uint64_t>(idx + 9);
  if (version != 1) shard_error(ip, "has version " + std::to_string(version) + ", expected 1" + kRewrite);
  const uint8_t code = idx[17];
  if (code != kUint16 && code != kInt32)
    shard_error(ip, "holds dtype code " + std::to_string(code) +
                        "; Atoll reads uint16 (8) and int32 (4) tokens -- write it with one of those");
  bytes_per_token_ = code == kUint16 ? 2 : 4;
  const auto sequences = load_unaligned<uint64_t>(idx + 18), documents = load_unaligned<uint64_t>(idx + 26);
  // Counts beyond what any file holds would overflow the sizes below: the file is not an index.
  const auto available = static_cast<uint64_t>(index_.size());
  if (sequences > available || documents > available || documents < 1 ||
      kIndexHeaderBytes + 12 * sequences + 8 * documents > available)
    shard_error(ip, "is truncated or corrupt: " + std::to_string(sequences) + " sequences and " +
                        std::to_string(documents) + " document indices do not fit its " +
                        std::to_string(available) + " bytes" + kRewrite);
  sequences_ = static_cast<int64_t>(sequences);
  documents_ = static_cast<int64_t>(documents);
  sizes_at_ = kIndexHeaderBytes;
  pointers_at_ = sizes_at_ + 4 * sequences_;
  documents_at_ = pointers_at_ + 8 * sequences_;
  // Read as one stream, the sequences must lie back to back from the start of the .bin.
  int64_t end = 0;
  for (int64_t s = 0; s < sequences_; ++s) {
    const auto size = load_unaligned<int32_t>(idx + sizes_at_ + 4 * s);
    if (size < 0 || pointer(s) != end)
      shard_error(ip, "is corrupt: sequence " + std::to_string(s) + " has size " + std::to_string(size) +
                          " at byte " + std::to_string(pointer(s)) + " of the .bin, expected byte " +
                          std::to_string(end) + kRewrite);
    end += int64_t{size} * bytes_per_token_;
  }
  int64_t previous = 0;
  for (int64_t d = 0; d < documents_; ++d) {
    const int64_t first = document_index(d);
    if (first < previous || first > sequences_ || (d == 0 && first != 0) ||
        (d == documents_ - 1 && first != sequences_))
      shard_error(ip, "is corrupt: document index " + std::to_string(d) + " is " + std::to_string(first) +
                          " (they rise from 0 to the sequence count " + std::to_string(sequences_) + ")" +
                          kRewrite);
    previous = first;
  }
  const int64_t count = end / bytes_per_token_;
  if (count == 0) shard_error(ip, std::string("describes no tokens") + kRewrite);
  if (bin_.size() < end)
    shard_error(path_, "holds " + std::to_string(bin_.size()) + " bytes but " + ip + " describes " +
                           std::to_string(end) + "; the .bin is truncated" + kRewrite);
  tokens_ = TokenSpan(bin_.bytes(), bytes_per_token_, count, path_);
}

int64_t MegatronShard::pointer(int64_t sequence) const {
  return load_unaligned<int64_t>(index_.bytes() + pointers_at_ + 8 * sequence);
}

int64_t MegatronShard::document_index(int64_t document) const {
  return load_unaligned<int64_t>(index_.bytes() + documents_at_ + 8 * document);
}

int64_t MegatronShard::document_start(int64_t document) const {
  const int64_t first = document_index(document);
  return first == sequences_ ? tokens_.size() : pointer(first) / bytes_per_token_;
}

std::optional<std::vector<int64_t>> MegatronShard::document_starts(int64_t begin, int64_t count) const {
  // The first document starting at or after `begin`, by binary search over the mapped index.
  int64_t low = 0, high = documents() + 1;
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (document_start(mid) < begin)
      low = mid + 1;
    else
      high = mid;
  }
  std::vector<int64_t> starts;
  for (int64_t d = low; d < documents(); ++d) {
    const int64_t start = document_start(d);
    if (start >= begin + count) break;
    if (starts.empty() || starts.back() != start) starts.push_back(start);  // empty documents share one
  }
  return starts;
}

}  // namespace atl::runtime
