#include "runtime/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace atl::runtime {
namespace {

constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error("data: " + path + " " + problem);
}

}  // namespace

TokenShard::TokenShard(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT)
      fail(path, "does not exist; run `atoll data prepare` or fix the data path in the config");
    fail(path, std::string("cannot be opened (") + std::strerror(errno) + "); check its permissions");
  }
  struct stat info {};
  fstat(fd, &info);
  const int64_t file_bytes = info.st_size;
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    fail(path, "holds " + std::to_string(file_bytes) +
                   " bytes, less than the 1024-byte llm.c header; re-run `atoll data prepare`");
  }
  map_ = mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(path, std::string("cannot be memory-mapped (") + std::strerror(errno) + ")");
  }
  map_bytes_ = static_cast<size_t>(file_bytes);
  int32_t header[3];
  std::memcpy(header, map_, sizeof header);
  const int32_t magic = header[0], version = header[1];
  if (magic == kMagic16 && version == kVersion16) {
    bytes_per_token_ = 2;
  } else if (magic == kMagic32 && version == kVersion32) {
    bytes_per_token_ = 4;
  } else if (magic == kMagic16 || magic == kMagic32) {
    fail(path, "has magic " + std::to_string(magic) + " with unknown version " + std::to_string(version) +
                   " (expected 1 for 20240520, 7 for 20240801); re-run `atoll data prepare`");
  } else {
    fail(path, "has magic " + std::to_string(magic) +
                   ", expected 20240520 (uint16) or 20240801 (uint32); is it an llm.c token shard?");
  }
  tokens_ = header[2];
  if (tokens_ <= 0)
    fail(path, "holds no tokens (header count " + std::to_string(tokens_) + "); re-run `atoll data prepare`");
  const int64_t body_bytes = file_bytes - kHeaderBytes;
  if (body_bytes < tokens_ * bytes_per_token_)
    fail(path, "is truncated: header says " + std::to_string(tokens_) + " tokens (" +
                   std::to_string(tokens_ * bytes_per_token_) + " bytes) but the file holds " +
                   std::to_string(body_bytes) + " bytes after the header; re-run `atoll data prepare`");
  body_ = static_cast<const unsigned char*>(map_) + kHeaderBytes;
}

TokenShard::~TokenShard() {
  if (map_) munmap(map_, map_bytes_);
}

uint32_t TokenShard::token(int64_t i) const {
  if (bytes_per_token_ == 2) {
    uint16_t t;
    std::memcpy(&t, body_ + i * 2, 2);
    return t;
  }
  uint32_t t;
  std::memcpy(&t, body_ + i * 4, 4);
  return t;
}

void TokenShard::read(int64_t begin, int64_t count, int64_t* out) const {
  if (begin < 0 || count < 0 || begin + count > tokens_)
    throw std::out_of_range("data: " + path_ + ": tokens [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") outside the shard's " +
                            std::to_string(tokens_));
  for (int64_t i = 0; i < count; ++i) out[i] = token(begin + i);
}

uint32_t TokenShard::max_token() const {
  uint32_t best = 0;
  for (int64_t i = 0; i < tokens_; ++i) best = std::max(best, token(i));
  return best;
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, bool force_uint32) {
  const bool wide =
      force_uint32 || std::any_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 0xFFFF; });
  if (tokens.size() > static_cast<size_t>(INT32_MAX))
    throw std::invalid_argument("data: " + path +
                                ": more than 2^31-1 tokens do not fit one llm.c shard; split the data");
  int32_t header[kHeaderInts] = {};
  header[0] = wide ? kMagic32 : kMagic16;
  header[1] = wide ? kVersion32 : kVersion16;
  header[2] = static_cast<int32_t>(tokens.size());
  const std::string temporary = path + ".tmp";
  std::FILE* f = std::fopen(temporary.c_str(), "wb");
  if (!f) throw std::runtime_error("data: cannot write " + temporary + " (" + std::strerror(errno) + ")");
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1;
  if (wide) {
    ok = ok && std::fwrite(tokens.data(), 4, tokens.size(), f) == tokens.size();
  } else {
    std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
    ok = ok && std::fwrite(narrow.data(), 2, narrow.size(), f) == narrow.size();
  }
  ok = (std::fflush(f) == 0) && ok && fsync(fileno(f)) == 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error("data: cannot write " + path + " (" + std::strerror(errno) +
                             "); check free space");
  }
}

}  // namespace atl::runtime
