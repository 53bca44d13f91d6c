#include "checkpoint/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "checkpoint/checkpoint_error.h"

namespace atl::checkpoint {
namespace {

// nftw's callback takes no user data; on failure errno says why.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 ? 0 : -1;
}

}  // namespace

void remove_tree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0 && errno == ENOENT) return;
  // FTW_DEPTH: a directory's entries before the directory; FTW_PHYS: links removed, not followed.
  constexpr int kOpenDirectories = 16;
  if (::nftw(path.c_str(), remove_entry, kOpenDirectories, FTW_DEPTH | FTW_PHYS) != 0)
    throw CheckpointError("checkpoint: cannot remove " + path + ": " + std::strerror(errno));
}

}  // namespace atl::checkpoint
