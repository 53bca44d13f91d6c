#include "runtime/metrics/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "checkpoint/crc32c.h"
#include "runtime/metrics/tensorboard_event.pb.h"

namespace fs = std::filesystem;

namespace atl::runtime {
namespace {

constexpr size_t kHeaderBytes = 12;  // uint64 length + uint32 masked CRC of it
constexpr size_t kFooterBytes = 4;   // uint32 masked CRC of the data

// TFRecord integers are little-endian whatever the host; write and read them byte by byte.
void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return value;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

// TensorBoard's naming, made unique within dir so two writers started in the same second coexist.
fs::path new_event_file(const fs::path& dir) {
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::string base = "events.out.tfevents." + std::to_string(seconds) + "." + host_name();
  fs::path candidate = dir / base;
  for (int n = 1; fs::exists(candidate); ++n) candidate = dir / (base + "." + std::to_string(n));
  return candidate;
}

[[noreturn]] void record_error(const std::string& path, size_t index, size_t offset,
                               const std::string& what) {
  throw std::runtime_error(path + ": record " + std::to_string(index) + " at byte " + std::to_string(offset) +
                           " " + what);
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = checkpoint::crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw std::runtime_error("cannot create the TensorBoard directory '" + dir +
                             "': " + (ec ? ec.message() : std::string("a file of that name exists")) +
                             "; point the TensorBoard directory at a writable location");
  }
  path_ = new_event_file(dir).string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    throw std::runtime_error("cannot open the TensorBoard event file '" + path_ +
                             "' for writing; check the permissions and free space of '" + dir + "'");
  }
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_file_version("brain.Event:2");
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::add_scalar(const std::string& tag, int64_t step, double value) {
  add_scalars(step, {{tag, value}});
}

void TensorBoardWriter::add_scalars(int64_t step,
                                    const std::vector<std::pair<std::string, double>>& scalars) {
  if (scalars.empty()) return;
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
    entry->set_tag(tag);
    entry->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::flush() {
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write the TensorBoard event file '" + path_ + "' (disk full?)");
}

// One write per record, then a flush: a reader running alongside sees whole records (or a
// truncated tail it reports as such), never interleaved pieces.
void TensorBoardWriter::write_record(const std::string& data) {
  std::string record;
  record.reserve(kHeaderBytes + data.size() + kFooterBytes);
  put_le(record, data.size(), 8);
  put_le(record, masked_crc32c(record.data(), 8), 4);
  record += data;
  put_le(record, masked_crc32c(data.data(), data.size()), 4);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  flush();
}

std::vector<ScalarEvent> read_tensorboard_scalars(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open the TensorBoard event file '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read the TensorBoard event file '" + path + "'");

  std::vector<ScalarEvent> scalars;
  size_t offset = 0;
  for (size_t index = 0; offset < bytes.size(); ++index) {
    const size_t left = bytes.size() - offset;
    if (left < kHeaderBytes) record_error(path, index, offset, "is truncated");
    const char* header = bytes.data() + offset;
    if (get_le(header + 8, 4) != masked_crc32c(header, 8))
      record_error(path, index, offset, "has a bad length CRC");
    const uint64_t length = get_le(header, 8);
    // Compared without adding to length, which a damaged-but-checksummed file could make overflow.
    if (length > left - kHeaderBytes || left - kHeaderBytes - length < kFooterBytes) {
      record_error(path, index, offset, "is truncated");
    }
    const char* data = header + kHeaderBytes;
    if (get_le(data + length, 4) != masked_crc32c(data, length)) {
      record_error(path, index, offset, "has a bad data CRC");
    }
    tensorboard::Event event;
    if (length > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
        !event.ParseFromArray(data, static_cast<int>(length))) {
      record_error(path, index, offset, "is not an Event");
    }
    if (event.has_summary()) {
      for (const tensorboard::Summary::Value& value : event.summary().value()) {
        if (value.value_case() != tensorboard::Summary::Value::kSimpleValue) continue;  // not a scalar
        scalars.push_back({value.tag(), event.step(), value.simple_value(), event.wall_time()});
      }
    }
    offset += kHeaderBytes + length + kFooterBytes;
  }
  return scalars;
}

std::vector<std::string> tensorboard_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error("'" + dir + "' is not a directory; expected a TensorBoard log directory");
  }
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().filename().string().find("tfevents") != std::string::npos) {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace atl::runtime
