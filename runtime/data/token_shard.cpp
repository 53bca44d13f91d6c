#include "runtime/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace atl::runtime {
namespace {

// llm.c writes tokens in the host order of x86/ARM; reading them as-is needs the same order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token shards are little-endian");

constexpr int kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
constexpr int32_t kMagic16 = 20240520, kVersion16 = 1;
constexpr int32_t kMagic32 = 20240801, kVersion32 = 7;
constexpr const char* kRerun = "; re-run `atoll data prepare`";

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error("data: " + path + " " + problem);
}

// Calls fn(i, token) for tokens [begin, begin + count), choosing the width once rather than per
// token. memcpy because the body need not be aligned for the token type.
template <typename Fn>
void for_each_token(const unsigned char* body, int bytes_per_token, int64_t begin, int64_t count, Fn fn) {
  auto walk = [&](auto zero) {
    using T = decltype(zero);
    const unsigned char* p = body + begin * static_cast<int64_t>(sizeof(T));
    for (int64_t i = 0; i < count; ++i, p += sizeof(T)) {
      T t;
      std::memcpy(&t, p, sizeof(T));
      fn(i, static_cast<uint32_t>(t));
    }
  };
  if (bytes_per_token == 2)
    walk(uint16_t{});
  else
    walk(uint32_t{});
}

}  // namespace

TokenShard::TokenShard(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT)
      fail(path, "does not exist; run `atoll data prepare` or fix data.train/data.val in the config");
    fail(path, std::string("cannot be opened (") + std::strerror(errno) + "); check its permissions");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail(path, "is not a regular file; point the config at a token shard (.bin)");
  }
  const int64_t file_bytes = info.st_size;
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    fail(path,
         "holds " + std::to_string(file_bytes) + " bytes, less than the 1024-byte llm.c header" + kRerun);
  }
  map_ = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(path, std::string("cannot be memory-mapped (") + std::strerror(map_errno) + ")");
  }
  map_bytes_ = static_cast<size_t>(file_bytes);
  // From here on a throw leaves the constructor without running the destructor: unmap by hand.
  try {
    int32_t header[3];
    std::memcpy(header, map_, sizeof header);
    const int32_t magic = header[0], version = header[1];
    if (magic == kMagic16 && version == kVersion16) {
      bytes_per_token_ = 2;
    } else if (magic == kMagic32 && version == kVersion32) {
      bytes_per_token_ = 4;
    } else if (magic == kMagic16 || magic == kMagic32) {
      fail(path, "has magic " + std::to_string(magic) + " with unknown version " + std::to_string(version) +
                     " (expected 1 for 20240520, 7 for 20240801)" + kRerun);
    } else {
      fail(path, "has magic " + std::to_string(magic) +
                     ", expected 20240520 (uint16) or 20240801 (uint32); is it an llm.c token shard?");
    }
    tokens_ = header[2];
    if (tokens_ <= 0) fail(path, "holds no tokens (header count " + std::to_string(tokens_) + ")" + kRerun);
    const int64_t body_bytes = file_bytes - kHeaderBytes;
    if (body_bytes < tokens_ * bytes_per_token_)
      fail(path, "is truncated: header says " + std::to_string(tokens_) + " tokens (" +
                     std::to_string(tokens_ * bytes_per_token_) + " bytes) but the file holds " +
                     std::to_string(body_bytes) + " bytes after the header" + kRerun);
  } catch (...) {
    unmap();
    throw;
  }
  body_ = static_cast<const unsigned char*>(map_) + kHeaderBytes;
}

TokenShard::~TokenShard() {
  unmap();
}

TokenShard::TokenShard(TokenShard&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      body_(std::exchange(other.body_, nullptr)),
      tokens_(std::exchange(other.tokens_, 0)),
      bytes_per_token_(other.bytes_per_token_) {}

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    body_ = std::exchange(other.body_, nullptr);
    tokens_ = std::exchange(other.tokens_, 0);
    bytes_per_token_ = other.bytes_per_token_;
  }
  return *this;
}

void TokenShard::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
}

void TokenShard::check_range(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin > tokens_ - count)
    throw std::out_of_range("data: " + path_ + ": tokens [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") are outside the shard's " +
                            std::to_string(tokens_) + " tokens");
}

uint32_t TokenShard::token(int64_t i) const {
  check_range(i, 1);
  uint32_t value = 0;
  for_each_token(body_, bytes_per_token_, i, 1, [&](int64_t, uint32_t t) { value = t; });
  return value;
}

void TokenShard::read(int64_t begin, int64_t count, int64_t* out) const {
  check_range(begin, count);
  for_each_token(body_, bytes_per_token_, begin, count, [&](int64_t i, uint32_t t) { out[i] = t; });
}

uint32_t TokenShard::max_token() const {
  uint32_t best = 0;
  for_each_token(body_, bytes_per_token_, 0, tokens_, [&](int64_t, uint32_t t) { best = std::max(best, t); });
  return best;
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
