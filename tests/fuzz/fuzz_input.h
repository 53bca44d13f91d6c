// What every fuzz target shares: a scratch directory for the files a reader opens (readers take
// paths, so each input is written out first), the split of one input into several named files (a
// checkpoint or a Hugging Face directory is a set of files), and the rule that decides a finding:
// a reader may reject an input only with its documented one-line error. Any other exception
// (c10::Error from LibTorch, nlohmann-json's, std::bad_alloc, std::length_error) aborts, and so
// libFuzzer reports it like a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace atl::fuzz {

// A directory of this process's own under TMPDIR (or /tmp), emptied before each input and removed at
// exit; libFuzzer's workers are separate processes, so they never share one.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // Removes everything in it.
  void clear() const;
  // Writes `bytes` to `name` below it (creating parent directories); returns the path.
  std::string write(const std::string& name, std::string_view bytes) const;
  // Empties it and writes the input alone to `name`; returns the file's path.
  std::string hold(const std::string& name, const uint8_t* data, size_t size) const;
  // Empties it and writes the files of a multi-file input (split_files); returns the directory.
  std::string hold_files(const uint8_t* data, size_t size) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One named file of a multi-file input.
struct NamedFile {
  std::string name;
  std::string bytes;
};

// Splits an input into files. Each file is: one byte N, N bytes of name, a 4-byte little-endian
// length L, then L bytes (the last file's L is cut to what is left). A name that could leave the
// directory (absolute, "..", empty parts, characters other than [A-Za-z0-9._-/]) is dropped with its
// bytes; a later file of the same name replaces an earlier one.
std::vector<NamedFile> split_files(const uint8_t* data, size_t size);
// The inverse, for making seeds: files in that form, concatenated.
std::string join_files(const std::vector<NamedFile>& files);

// The exception types a reader documents for bad input.
enum class Rejection { kRuntimeError, kInvalidArgument, kConfigError };
// All three: what the loaders of a model directory (trained_model.h) may throw, since they read a
// config, a checkpoint and a tokenizer; the CLI turns each into one line.
inline std::vector<Rejection> any_documented_rejection() {
  return {Rejection::kRuntimeError, Rejection::kInvalidArgument, Rejection::kConfigError};
}

// Runs `read`. Returns normally when it succeeds or throws one of `allowed` (tested by dynamic_cast,
// so subclasses count) with a non-empty message free of newlines; otherwise prints the exception and
// aborts. A ConfigError may list several problems, each one line.
void expect_clean(const std::function<void()>& read, std::vector<Rejection> allowed);

}  // namespace atl::fuzz
