// The error of everything that reads or writes checkpoints on disk. Header-only, so that the small
// pieces beside the checkpoint library (remove_tree, which the tests link on its own) can throw it.
#pragma once

#include <stdexcept>
#include <string>

#include "text/one_line.h"

namespace atl::checkpoint {

// Any problem with a checkpoint on disk: one line naming the file or tensor and what is wrong.
// Those thrown out of a collective (save, resume) are agreed: every rank throws the same one.
// Names and keys from a damaged file may hold line breaks: they are written as \n (one_line.h).
class CheckpointError : public std::runtime_error {
 public:
  explicit CheckpointError(const std::string& what) : std::runtime_error(text::one_line(what)) {}
};

}  // namespace atl::checkpoint
