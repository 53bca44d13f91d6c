#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
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

static at::ScalarType dtype_of(const std::string& name, const std::string& path) {
  for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble, at::kLong, at::kInt})
    if (safetensors_dtype(t) == name) return t;
  throw std::runtime_error("safetensors: " + path + " holds dtype " + name + ", which Atoll does not read");
}

std::vector<NamedTensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("safetensors: cannot open " + path);
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | length[i];
  if (!in || header_size > (uint64_t{1} << 30))
    throw std::runtime_error("safetensors: " + path + " has no valid header");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw std::runtime_error("safetensors: " + path + " is truncated in its header");
  const uint64_t data_start = 8 + header_size;
  // Each entry: "NAME":{"dtype":"F32","shape":[..],"data_offsets":[begin,end]} (keys in any order).
  const std::regex entry(R"re("([^"]+)"\s*:\s*\{([^{}]*)\})re");
  const std::regex dtype_re(R"re("dtype"\s*:\s*"([A-Z0-9]+)")re"),
      shape_re(R"re("shape"\s*:\s*\[([0-9,\s]*)\])re"),
      offsets_re(R"re("data_offsets"\s*:\s*\[\s*([0-9]+)\s*,\s*([0-9]+)\s*\])re");
  const std::regex number("[0-9]+");
  std::vector<NamedTensor> tensors;
  for (std::sregex_iterator it(header.begin(), header.end(), entry), end; it != end; ++it) {
    const std::string name = (*it)[1].str(), body = (*it)[2].str();
    if (name == "__metadata__") continue;
    std::smatch dtype, shape, offsets;
    if (!std::regex_search(body, dtype, dtype_re) || !std::regex_search(body, shape, shape_re) ||
        !std::regex_search(body, offsets, offsets_re))
      throw std::runtime_error("safetensors: " + path + ": malformed entry for " + name);
    std::vector<int64_t> sizes;
    const std::string dims = shape[1].str();
    for (std::sregex_iterator d(dims.begin(), dims.end(), number), e; d != e; ++d)
      sizes.push_back(std::stoll(d->str()));
    const uint64_t begin = std::stoull(offsets[1].str()), finish = std::stoull(offsets[2].str());
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(dtype_of(dtype[1].str(), path)));
    if (finish - begin != t.nbytes())
      throw std::runtime_error("safetensors: " + path + ": " + name + " has " +
                               std::to_string(finish - begin) + " bytes for its shape");
    in.seekg(static_cast<std::streamoff>(data_start + begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!in)
      throw std::runtime_error("safetensors: " + path + " is truncated: " + name + " runs past its end");
    tensors.push_back({name, t});
  }
  return tensors;
}

}  // namespace atl::checkpoint
