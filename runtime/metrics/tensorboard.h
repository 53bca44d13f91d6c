// TensorBoard scalar logging without TensorFlow: event files in TFRecord framing that TensorBoard
// reads as they grow, and a reader that verifies every record's checksums (for tests and tooling).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace atl::runtime {

// TFRecord's masked CRC-32C: ((crc >> 15) | (crc << 17)) + 0xa282ead8. The mask keeps a checksum
// stored next to its own data from checksumming well.
uint32_t masked_crc32c(const void* data, size_t size);

// Appends TensorBoard scalar events to <dir>/events.out.tfevents.<unix seconds>.<hostname> (a ".N"
// suffix is added if that file already exists, so a second writer never clobbers the first).
// Records: uint64 length, uint32 masked CRC of the length, data, uint32 masked CRC of the data, all
// little-endian; the first is the file_version "brain.Event:2" event. Every add is flushed, so the
// file is readable while training runs. Not thread-safe: one writer per thread (rank 0 in practice).
class TensorBoardWriter {
 public:
  // Creates dir (and its parents); throws std::runtime_error naming the path if it cannot.
  explicit TensorBoardWriter(const std::string& dir);

  void add_scalar(const std::string& tag, int64_t step, double value);  // wall_time = now
  // One Event holding several values (one record per step instead of one per scalar).
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  std::ofstream out_;
};

struct ScalarEvent {
  std::string tag;
  int64_t step = 0;
  float value = 0.0f;  // TensorBoard stores scalars as float
  double wall_time = 0.0;
};

// Every scalar of an event file in file order, verifying both CRCs of each record. Throws
// std::runtime_error "<file>: record N at byte OFFSET has a bad length CRC" (or "has a bad data
// CRC", "is truncated", "is not an Event") on damage; N counts records from 0.
std::vector<ScalarEvent> read_tensorboard_scalars(const std::string& path);

// The event files (names containing "tfevents") directly in dir, as paths sorted by name; throws if
// dir is not a directory.
std::vector<std::string> tensorboard_files(const std::string& dir);

}  // namespace atl::runtime
