#include "runtime/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "runtime/data/shard.h"

namespace atl::runtime {

MappedFile::MappedFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT)
      shard_error(path, "does not exist; run `atoll data prepare` or fix data.train/data.val in the config");
    shard_error(path, std::string("cannot be opened (") + std::strerror(errno) + "); check its permissions");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    shard_error(path, "is not a regular file; point the config at a token shard (.bin)");
  }
  bytes_ = static_cast<size_t>(info.st_size);
  if (bytes_ > 0) map_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    bytes_ = 0;
    shard_error(path, std::string("cannot be memory-mapped (") + std::strerror(map_errno) + ")");
  }
}

MappedFile::~MappedFile() {
  unmap();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : map_(std::exchange(other.map_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    map_ = std::exchange(other.map_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MappedFile::unmap() {
  if (map_) ::munmap(map_, bytes_);
  map_ = nullptr;
}

}  // namespace atl::runtime
