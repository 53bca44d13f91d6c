// CRC-32C (Castagnoli), the checksum of every checkpoint chunk: the polynomial of iSCSI, ext4 and
// safetensors tooling, with better error detection than zlib's CRC-32 for the same cost.
#pragma once

#include <cstddef>
#include <cstdint>

namespace atl::checkpoint {

// Extends `crc` (0 to start) over `size` bytes.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace atl::checkpoint
