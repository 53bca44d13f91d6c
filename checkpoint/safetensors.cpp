#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "checkpoint/crc32c.h"

namespace atl::checkpoint {
namespace {

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("checkpoint: cannot write " + path + ": " + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

std::string safetensors_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "F32";
    case at::kBFloat16:
      return "BF16";
    case at::kHalf:
      return "F16";
    case at::kDouble:
      return "F64";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    default:
      throw std::invalid_argument("safetensors: unsupported dtype");
  }
}

std::vector<WrittenTensor> write_safetensors(const std::string& path,
                                             const std::vector<NamedTensor>& tensors) {
  std::string header = "{";
  uint64_t data_bytes = 0;
  for (const NamedTensor& t : tensors) {
    std::string shape;
    for (int64_t d : t.tensor.sizes()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const uint64_t n = t.tensor.nbytes();
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" +
              safetensors_dtype(t.tensor.scalar_type()) + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data_bytes) + "," + std::to_string(data_bytes + n) + "]}";
    data_bytes += n;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // the format allows padding; keeps data 8-aligned
  const uint64_t header_size = header.size();

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("checkpoint: cannot create " + path + ": " + std::strerror(errno));
  std::vector<WrittenTensor> written;
  try {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_size >> (8 * i));
    write_all(fd, length, 8, path);
    write_all(fd, header.data(), header.size(), path);
    uint64_t offset = 8 + header_size;
    for (const NamedTensor& t : tensors) {
      const size_t n = t.tensor.nbytes();
      write_all(fd, t.tensor.data_ptr(), n, path);
      written.push_back({offset, n, crc32c(t.tensor.data_ptr(), n)});
      offset += n;
    }
    if (::fsync(fd) != 0)
      throw std::runtime_error("checkpoint: cannot fsync " + path + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return written;
}

}  // namespace atl::checkpoint
