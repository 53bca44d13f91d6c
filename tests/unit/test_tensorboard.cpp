// TensorBoard event files: scalars round-trip, the framing is TFRecord's (checked against the
// formula independently of the writer), and every kind of damage is reported with its record.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/crc32c.h"
#include "runtime/metrics/tensorboard.h"
#include "runtime/metrics/tensorboard_event.pb.h"
#include "tests/temp_dir_test.h"

namespace fs = std::filesystem;
using atl::runtime::read_tensorboard_scalars;
using atl::runtime::ScalarEvent;
using atl::runtime::tensorboard_files;
using atl::runtime::TensorBoardWriter;

namespace {

class TensorBoardTest : public atl::test::TempDirTest {};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint64_t le(const std::string& bytes, size_t offset, int width) {
  uint64_t value = 0;
  for (int i = 0; i < width; ++i) value |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  return value;
}

// The formula from the TFRecord format, written out here rather than taken from the writer.
uint32_t expected_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// Byte offsets of every record, walking the lengths only.
std::vector<size_t> record_offsets(const std::string& bytes) {
  std::vector<size_t> offsets;
  for (size_t offset = 0; offset + 12 <= bytes.size(); offset += 12 + le(bytes, offset, 8) + 4) {
    offsets.push_back(offset);
  }
  return offsets;
}

std::string thrown_message(const std::string& path) {
  try {
    read_tensorboard_scalars(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

// A file with the version record and two scalar records (records 1 and 2).
std::string write_sample(const fs::path& dir) {
  TensorBoardWriter writer(dir.string());
  writer.add_scalar("train/loss", 1, 2.5);
  writer.add_scalar("train/loss", 2, 2.25);
  return writer.path();
}

TEST(TensorBoardCrc, KnownVectors) {
  EXPECT_EQ(atl::checkpoint::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(atl::runtime::masked_crc32c("123456789", 9), expected_mask(0xE3069283u));
  EXPECT_EQ(atl::runtime::masked_crc32c("123456789", 9), 0xC78AB0E5u);  // computed independently
  const uint8_t zero_length[8] = {};
  EXPECT_EQ(atl::runtime::masked_crc32c(zero_length, 8), 0x07980329u);
}

TEST_F(TensorBoardTest, ScalarsRoundTrip) {
  TensorBoardWriter writer(dir_.string());
  writer.add_scalar("train/loss", 1, 3.25);
  writer.add_scalars(2, {{"train/loss", 3.0}, {"train/lr", 1e-4}, {"train/grad_norm", 0.0}});
  writer.add_scalar("train/loss", 3, 2.75);

  // Readable while the writer is still open: every add is flushed.
  const std::vector<ScalarEvent> events = read_tensorboard_scalars(writer.path());
  const std::vector<std::pair<std::string, int64_t>> expected_keys = {
      {"train/loss", 1}, {"train/loss", 2}, {"train/lr", 2}, {"train/grad_norm", 2}, {"train/loss", 3}};
  const std::vector<float> expected_values = {3.25f, 3.0f, static_cast<float>(1e-4), 0.0f, 2.75f};
  ASSERT_EQ(events.size(), expected_keys.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].tag, expected_keys[i].first) << i;
    EXPECT_EQ(events[i].step, expected_keys[i].second) << i;
    EXPECT_EQ(events[i].value, expected_values[i]) << i;
    EXPECT_GT(events[i].wall_time, 1.6e9) << i;  // seconds since the epoch, not a stray value
  }
  EXPECT_EQ(events[1].wall_time, events[2].wall_time);  // one Event for add_scalars
}

TEST_F(TensorBoardTest, FileNameAndVersionRecord) {
  const std::string path = write_sample(dir_);
  EXPECT_EQ(fs::path(path).parent_path(), dir_);
  EXPECT_EQ(fs::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u) << path;

  // Parse the framing here, independently of the reader, and check each CRC against the formula.
  const std::string bytes = read_bytes(path);
  const std::vector<size_t> offsets = record_offsets(bytes);
  ASSERT_EQ(offsets.size(), 3u);
  for (size_t offset : offsets) {
    const uint64_t length = le(bytes, offset, 8);
    EXPECT_EQ(le(bytes, offset + 8, 4), expected_mask(atl::checkpoint::crc32c(bytes.data() + offset, 8)));
    EXPECT_EQ(le(bytes, offset + 12 + length, 4),
              expected_mask(atl::checkpoint::crc32c(bytes.data() + offset + 12, length)));
  }
  EXPECT_EQ(offsets.back() + 12 + le(bytes, offsets.back(), 8) + 4, bytes.size());

  atl::tensorboard::Event first;
  ASSERT_TRUE(first.ParseFromArray(bytes.data() + 12, static_cast<int>(le(bytes, 0, 8))));
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  EXPECT_FALSE(first.has_summary());
  EXPECT_GT(first.wall_time(), 1.6e9);

  atl::tensorboard::Event second;
  ASSERT_TRUE(
      second.ParseFromArray(bytes.data() + offsets[1] + 12, static_cast<int>(le(bytes, offsets[1], 8))));
  EXPECT_EQ(second.step(), 1);
  ASSERT_EQ(second.summary().value_size(), 1);
  EXPECT_EQ(second.summary().value(0).tag(), "train/loss");
  EXPECT_EQ(second.summary().value(0).simple_value(), 2.5f);
}

TEST_F(TensorBoardTest, BadDataCrcNamesTheRecord) {
  const std::string path = write_sample(dir_);
  std::string bytes = read_bytes(path);
  const size_t offset = record_offsets(bytes)[1];
  bytes[offset + 12 + 3] ^= 0x01;
  write_bytes(path, bytes);
  EXPECT_EQ(thrown_message(path),
            path + ": record 1 at byte " + std::to_string(offset) + " has a bad data CRC");
}

TEST_F(TensorBoardTest, BadLengthCrcNamesTheRecord) {
  const std::string path = write_sample(dir_);
  std::string bytes = read_bytes(path);
  const size_t offset = record_offsets(bytes)[2];
  bytes[offset] ^= 0x01;
  write_bytes(path, bytes);
  EXPECT_EQ(thrown_message(path),
            path + ": record 2 at byte " + std::to_string(offset) + " has a bad length CRC");
}

TEST_F(TensorBoardTest, TruncatedFile) {
  const std::string path = write_sample(dir_);
  const std::string bytes = read_bytes(path);
  const size_t offset = record_offsets(bytes)[2];
  // Cut inside the last record's data, then inside its header: both are truncation, not a bad CRC.
  for (size_t size : {bytes.size() - 6, offset + 5}) {
    write_bytes(path, bytes.substr(0, size));
    EXPECT_EQ(thrown_message(path), path + ": record 2 at byte " + std::to_string(offset) + " is truncated")
        << size;
  }
  write_bytes(path, bytes.substr(0, offset));  // a cut between records loses nothing already read
  EXPECT_EQ(read_tensorboard_scalars(path).size(), 1u);
}

TEST_F(TensorBoardTest, WritersInOneDirectoryNeverShareAFile) {
  const std::string first = write_sample(dir_);
  const std::string second = write_sample(dir_);
  EXPECT_NE(first, second);
  fs::create_directory(dir_ / "not-an-event-dir");
  write_bytes((dir_ / "metrics.jsonl").string(), "{}\n");

  std::vector<std::string> expected = {first, second};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(tensorboard_files(dir_.string()), expected);
  EXPECT_EQ(read_tensorboard_scalars(first).size(), 2u);
  EXPECT_EQ(read_tensorboard_scalars(second).size(), 2u);
}

TEST_F(TensorBoardTest, CreatesNestedDirectoryAndNamesAnUnusablePath) {
  TensorBoardWriter nested((dir_ / "a" / "b").string());
  EXPECT_EQ(tensorboard_files((dir_ / "a" / "b").string()), std::vector<std::string>{nested.path()});

  write_bytes((dir_ / "file").string(), "x");
  const std::string bad = (dir_ / "file" / "tb").string();
  try {
    TensorBoardWriter writer(bad);
    FAIL() << "expected a throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_THROW(tensorboard_files((dir_ / "missing").string()), std::runtime_error);
}

}  // namespace
