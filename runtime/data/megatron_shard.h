// Megatron's MMapIndexedDataset (megatron/core/datasets/indexed_dataset.py), read in place:
// PREFIX.bin holds the tokens of every sequence back to back, PREFIX.idx describes them --
//   "MMIDIDX\0\0", uint64 version 1, uint8 dtype code (Megatron's DType), uint64 sequence count S,
//   uint64 document count D, int32 sizes[S], int64 pointers[S] (byte offsets into .bin), int64
//   document indices[D] (the sequence each document starts at, from 0 to S),
// all little-endian and unaligned. Atoll reads the .bin as one stream of tokens, which is what
// Megatron's GPT datasets do too, and takes document starts from the index.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/data/mapped_file.h"
#include "runtime/data/shard.h"
#include "runtime/data/token_span.h"

namespace atl::runtime {

class MegatronShard final : public Shard {
 public:
  // `bin_path`: PREFIX.bin, with PREFIX.idx beside it. Throws std::runtime_error with one line
  // naming the file, the problem and the fix (missing or corrupt index, a token type other than
  // uint16 or int32, a .bin shorter than its index says).
  explicit MegatronShard(const std::string& bin_path);

  const std::string& path() const override { return path_; }
  int64_t size() const override { return tokens_.size(); }
  void read(int64_t begin, int64_t count, int64_t* out) const override { tokens_.read(begin, count, out); }
  uint32_t max_token() const override { return tokens_.max_token(); }
  std::optional<std::vector<int64_t>> document_starts(int64_t begin, int64_t count) const override;

  int64_t sequences() const { return sequences_; }
  int64_t documents() const { return documents_ - 1; }  // the index lists one start past the last

 private:
  int64_t pointer(int64_t sequence) const;
  int64_t document_index(int64_t document) const;
  // The token position where document `document` starts (documents() for the end of the data).
  int64_t document_start(int64_t document) const;

  std::string path_, index_path_;
  MappedFile bin_, index_;
  int bytes_per_token_ = 2;
  int64_t sequences_ = 0, documents_ = 0;
  int64_t sizes_at_ = 0, pointers_at_ = 0, documents_at_ = 0;  // byte offsets into the index
  TokenSpan tokens_;
};

// PREFIX.idx for PREFIX.bin (or for `bin_path` + ".idx" when it does not end in .bin).
std::string megatron_index_path(const std::string& bin_path);

}  // namespace atl::runtime
