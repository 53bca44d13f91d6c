// Deletes a directory tree with POSIX calls alone.
//
// Not std::filesystem::remove_all: the torch wheels' libraries export libstdc++'s std::filesystem
// functions as compiled by their own toolchain, and the dynamic linker may bind Atoll's call to
// that copy. Torch 2.11's remove_all, so bound, jumped to a null address from a build whose
// libstdc++ is linked statically (seen on an H100 node when checkpoint.keep pruned a checkpoint).
#pragma once

#include <string>

namespace atl::checkpoint {

// Removes `path` and everything under it, without following symbolic links; a missing path is not
// an error. Throws CheckpointError naming the entry that could not be removed and why.
void remove_tree(const std::string& path);

}  // namespace atl::checkpoint
