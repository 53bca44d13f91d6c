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

// Damage: a file missing, truncated, unreadable or failing its checksum, a manifest that does not
// parse or contradicts itself. Readers that may take an older checkpoint instead (sample, eval)
// fall back past this one only; any other CheckpointError (a format this build does not read, a
// checkpoint of another model) is the user's to see.
class CheckpointDamaged : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

}  // namespace atl::checkpoint
