#include "runtime/data/split_shards.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace atl::runtime {
namespace {

// llm.c's header (token_shard.h): 256 int32, [0] magic, [1] version, [2] token count.
constexpr int kShardHeaderInts = 256;
constexpr int32_t kNarrowMagic = 20240520, kNarrowVersion = 1;
constexpr int32_t kWideMagic = 20240801, kWideVersion = 7;

[[noreturn]] void write_failed(const std::string& path) {
  throw std::runtime_error("data prepare: cannot write " + path + " (" + std::strerror(errno) +
                           "); check free space and permissions");
}

}  // namespace

std::string numbered_shard_name(const std::string& side, size_t index) {
  char number[16];
  std::snprintf(number, sizeof number, "%05zu", index);
  return side + "-" + number + ".bin";
}

SplitShards::SplitShards(std::function<std::string(const std::string&)> output, std::string side,
                         int64_t shard_tokens, bool wide)
    : output_(std::move(output)), side_(std::move(side)), shard_tokens_(shard_tokens), wide_(wide) {}

SplitShards::~SplitShards() {
  if (!file_) return;
  std::fclose(file_);
  std::remove(temporary_.c_str());
}

void SplitShards::open_shard() {
  // The pid keeps two processes preparing the same directory from writing one temporary file.
  temporary_ = output_(side_ + ".partial." + std::to_string(::getpid()));
  file_ = std::fopen(temporary_.c_str(), "wb");
  if (!file_) write_failed(temporary_);
  const int32_t header[kShardHeaderInts] = {};
  if (std::fwrite(header, sizeof header, 1, file_) != 1) write_failed(temporary_);
  shards_.emplace_back();
}

void SplitShards::close_shard(const std::string& name) {
  ShardSummary& shard = shards_.back();
  int32_t header[3] = {wide_ ? kWideMagic : kNarrowMagic, wide_ ? kWideVersion : kNarrowVersion,
                       static_cast<int32_t>(shard.tokens)};
  shard.path = output_(name);
  // fsync before rename: otherwise a crash can leave the new name pointing at unwritten blocks.
  bool ok = std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(header, sizeof header, 1, file_) == 1 &&
            std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  ok = std::fclose(file_) == 0 && ok;
  file_ = nullptr;
  if (!ok || std::rename(temporary_.c_str(), shard.path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary_.c_str());
    errno = error;
    write_failed(shard.path);
  }
}

void SplitShards::add(const std::vector<uint32_t>& tokens, const std::vector<int>& sources,
                      int64_t documents) {
  std::vector<uint16_t> narrow;
  for (size_t done = 0; done < tokens.size();) {
    if (!file_) open_shard();
    ShardSummary* shard = &shards_.back();
    if (shard->tokens == shard_tokens_) {
      close_shard(numbered_shard_name(side_, shards_.size() - 1));
      open_shard();
      shard = &shards_.back();
    }
    if (done == 0) shard->documents += documents;
    shard->sources.insert(sources.begin(), sources.end());
    const size_t count =
        std::min<size_t>(tokens.size() - done, static_cast<size_t>(shard_tokens_ - shard->tokens));
    bool ok;
    if (wide_) {
      ok = std::fwrite(tokens.data() + done, 4, count, file_) == count;
    } else {
      narrow.assign(tokens.begin() + static_cast<std::ptrdiff_t>(done),
                    tokens.begin() + static_cast<std::ptrdiff_t>(done + count));
      ok = std::fwrite(narrow.data(), 2, count, file_) == count;
    }
    if (!ok) write_failed(temporary_);
    shard->tokens += static_cast<int64_t>(count);
    total_ += static_cast<int64_t>(count);
    done += count;
  }
}

std::vector<ShardSummary> SplitShards::finish() {
  if (!file_) return {};
  const bool numbered = shards_.size() > 1;
  close_shard(numbered ? numbered_shard_name(side_, shards_.size() - 1) : side_ + ".bin");
  // What an earlier run into this directory left under the other names.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(shards_.back().path).parent_path();
  std::error_code ignored;
  if (numbered) fs::remove(dir / (side_ + ".bin"), ignored);
  for (size_t i = numbered ? shards_.size() : 0; fs::remove(dir / numbered_shard_name(side_, i), ignored);
       ++i) {
  }
  // The partial shards of interrupted runs (their process gone; a run still going keeps its own).
  const std::string partial = side_ + ".partial.";
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(partial, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + partial.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(entry.path());
  }
  for (const fs::path& path : stale) fs::remove(path, ignored);
  return shards_;
}

}  // namespace atl::runtime
