// Shard files in the safetensors format (an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the data), so every shard a checkpoint
// writes opens with the safetensors library as well as with Atoll.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace atl::checkpoint {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;  // contiguous, CPU
};

// Where each tensor's data landed: absolute byte offset in the file, length, CRC-32C.
struct WrittenTensor {
  uint64_t byte_offset, length;
  uint32_t crc32c;
};

// What a write put into the file: each tensor's bytes, and the header (its JSON's length and the
// CRC-32C of the 8 length bytes and the JSON).
struct WrittenFile {
  std::vector<WrittenTensor> tensors;
  uint64_t header_length = 0;
  uint32_t header_crc32c = 0;
};

// Writes `tensors` to `path` and fsyncs it. Throws std::runtime_error naming the path on failure.
WrittenFile write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors);

// Safetensors' name for a dtype ("F32", "BF16", ...).
std::string safetensors_dtype(at::ScalarType dtype);

}  // namespace atl::checkpoint

namespace atl::checkpoint {

// Reads every tensor of a safetensors file (F32, BF16, F16, F64, I64, I32), as CPU tensors by name.
// std::runtime_error naming the file on a malformed header or short data.
std::vector<NamedTensor> read_safetensors(const std::string& path);

}  // namespace atl::checkpoint
