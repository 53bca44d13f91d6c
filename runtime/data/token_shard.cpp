#include "runtime/data/token_shard.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "runtime/data/megatron_shard.h"
#include "runtime/data/token_span.h"

#include "runtime/data/shard.h"

namespace atl::runtime {
namespace {

constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;
constexpr const char* kRerun = "; re-run `atoll data prepare`";

}  // namespace

TokenShard::TokenShard(const std::string& path) : path_(path), file_(path) {
  const int64_t file_bytes = file_.size();
  if (file_bytes < kHeaderBytes)
    shard_error(path, "holds " + std::to_string(file_bytes) + " bytes, less than the 1024-byte llm.c header" +
                          kRerun);
  const auto magic = load_unaligned<int32_t>(file_.bytes()),
             version = load_unaligned<int32_t>(file_.bytes() + 4);
  if (magic == kMagic16 && version == kVersion16) {
    bytes_per_token_ = 2;
  } else if (magic == kMagic32 && version == kVersion32) {
    bytes_per_token_ = 4;
  } else if (magic == kMagic16 || magic == kMagic32) {
    shard_error(path, "has magic " + std::to_string(magic) + " with unknown version " +
                          std::to_string(version) + " (expected 1 for 20240520, 7 for 20240801)" + kRerun);
  } else {
    shard_error(
        path,
        "has magic " + std::to_string(magic) +
            ", expected 20240520 (uint16) or 20240801 (uint32); is it an llm.c token shard? (a Megatron "
            ".bin needs its .idx beside it: " +
            megatron_index_path(path) + ")");
  }
  const int64_t count = load_unaligned<int32_t>(file_.bytes() + 8);
  if (count <= 0) shard_error(path, "holds no tokens (header count " + std::to_string(count) + ")" + kRerun);
  const int64_t body_bytes = file_bytes - kHeaderBytes;
  if (body_bytes < count * bytes_per_token_)
    shard_error(path, "is truncated: header says " + std::to_string(count) + " tokens (" +
                          std::to_string(count * bytes_per_token_) + " bytes) but the file holds " +
                          std::to_string(body_bytes) + " bytes after the header" + kRerun);
  tokens_ = TokenSpan(file_.bytes() + kHeaderBytes, bytes_per_token_, count, path_);
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, bool force_uint32) {
  if (tokens.empty())
    throw std::invalid_argument("data: " + path + ": no tokens to write; an empty shard cannot be read back");
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw std::invalid_argument("data: " + path +
                                ": more than 2^31-1 tokens do not fit one llm.c shard; split the data");
  const bool wide =
      force_uint32 || std::any_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 0xFFFF; });
  int32_t header[kHeaderInts] = {};
  header[0] = wide ? kMagic32 : kMagic16;
  header[1] = wide ? kVersion32 : kVersion16;
  header[2] = static_cast<int32_t>(tokens.size());

  // The pid keeps two processes preparing the same directory from writing one temporary file.
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (!f)
    throw std::runtime_error("data: cannot create " + temporary + " (" + std::strerror(errno) +
                             "); check that the directory exists and is writable");
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1;
  if (wide) {
    ok = ok && std::fwrite(tokens.data(), 4, tokens.size(), f) == tokens.size();
  } else {
    const std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    ok = ok && std::fwrite(narrow.data(), 2, narrow.size(), f) == narrow.size();
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at unwritten blocks.
  ok = ok && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  ok = ok && std::rename(temporary.c_str(), path.c_str()) == 0;
  if (!ok) {
    const int write_errno = errno;
    std::remove(temporary.c_str());
    throw std::runtime_error("data: cannot write " + path + " (" + std::strerror(write_errno) +
                             "); check free space and permissions");
  }
}

}  // namespace atl::runtime
