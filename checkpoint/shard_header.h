// The safetensors header of each shard file of a checkpoint, checked against the manifest before
// any byte of the file is trusted: the 8-byte length (compared with the recorded one before anything
// is allocated, so a length of 2^60 costs nothing), the CRC-32C of the length and the JSON, and
// every chunk's entry (present under its key, with the manifest's dtype and byte range). The chunks'
// own checksums cover the data; this covers what makes the file the safetensors file it claims to be.
#pragma once

#include <string>

#include "checkpoint/manifest.pb.h"

namespace atl::checkpoint {

// CheckpointError naming the file and the first problem. A checkpoint from before the headers were
// recorded (no shard_headers) has nothing to check.
void verify_shard_headers(const std::string& checkpoint_dir, const proto::Manifest& manifest);

}  // namespace atl::checkpoint
