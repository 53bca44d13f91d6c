#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "checkpoint/crc32c.h"
#include "checkpoint/json_integer.h"

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

WrittenFile write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors) {
  nlohmann::ordered_json entries = nlohmann::ordered_json::object();
  uint64_t data_bytes = 0;
  for (const NamedTensor& t : tensors) {
    const uint64_t n = t.tensor.nbytes();
    entries[t.name] = {{"dtype", safetensors_dtype(t.tensor.scalar_type())},
                       {"shape", t.tensor.sizes().vec()},
                       {"data_offsets", {data_bytes, data_bytes + n}}};
    data_bytes += n;
  }
  std::string header = entries.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the format allows padding; keeps data 8-aligned
  const uint64_t header_size = header.size();

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("checkpoint: cannot create " + path + ": " + std::strerror(errno));
  WrittenFile written;
  try {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(header_size >> (8 * i));
    write_all(fd, length, 8, path);
    write_all(fd, header.data(), header.size(), path);
    written.header_length = header_size;
    written.header_crc32c = crc32c(header.data(), header.size(), crc32c(length, 8));
    uint64_t offset = 8 + header_size;
    for (const NamedTensor& t : tensors) {
      // A synchronous save hands the live state over: on a GPU its bytes come to the host first.
      const at::Tensor host = t.tensor.cpu();
      const size_t n = host.nbytes();
      write_all(fd, host.data_ptr(), n, path);
      written.tensors.push_back({offset, n, crc32c(host.data_ptr(), n)});
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

// Elements of `sizes` times `element_bytes`, or nothing when that overflows 64 bits.
static std::optional<uint64_t> byte_size(const std::vector<int64_t>& sizes, uint64_t element_bytes) {
  uint64_t bytes = element_bytes;
  for (int64_t d : sizes)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return std::nullopt;
  return bytes;
}

std::vector<NamedTensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("safetensors: cannot open " + path);
  in.seekg(0, std::ios::end);
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | length[i];
  if (!in || header_size > (uint64_t{1} << 30))
    throw std::runtime_error("safetensors: " + path + " has no valid header");
  // Checked against the file before anything is allocated: a damaged length costs nothing.
  if (header_size > file_size - 8)
    throw std::runtime_error("safetensors: " + path + " is truncated in its header: it claims " +
                             std::to_string(header_size) + " bytes but the file has " +
                             std::to_string(file_size - 8) + " after the length");
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  if (!in) throw std::runtime_error("safetensors: " + path + " is truncated in its header");
  const uint64_t data_start = 8 + header_size, data_size = file_size - data_start;
  nlohmann::ordered_json entries;  // ordered: tensors come back in file order, read front to back
  try {
    entries = nlohmann::ordered_json::parse(header);
  } catch (const nlohmann::ordered_json::exception&) {  // a syntax error, or a number past 64 bits
    throw std::runtime_error("safetensors: " + path + ": the header is not JSON");
  }
  if (!entries.is_object())
    throw std::runtime_error("safetensors: " + path + ": the header is not a JSON object");
  std::vector<NamedTensor> tensors;
  // Each entry: "NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}.
  for (const auto& [name, entry] : entries.items()) {
    if (name == "__metadata__") continue;
    std::string dtype;
    std::vector<int64_t> sizes;
    uint64_t begin = 0, finish = 0;
    try {
      dtype = entry.at("dtype").get<std::string>();
      const auto shape = json_integers<int64_t>(entry.at("shape"));
      const auto offsets = json_integers<uint64_t>(entry.at("data_offsets"));
      if (!shape) throw std::out_of_range("shape");
      sizes = *shape;
      if (!offsets || offsets->size() != 2 || (*offsets)[1] < (*offsets)[0])
        throw std::out_of_range("data_offsets");
      begin = (*offsets)[0];
      finish = (*offsets)[1];
      if (std::any_of(sizes.begin(), sizes.end(), [](int64_t d) { return d < 0; }))
        throw std::out_of_range("shape");
    } catch (const std::exception&) {
      throw std::runtime_error("safetensors: " + path + ": malformed entry for " + name);
    }
    const at::ScalarType type = dtype_of(dtype, path);
    const std::optional<uint64_t> bytes = byte_size(sizes, c10::elementSize(type));
    if (!bytes || finish - begin != *bytes)
      throw std::runtime_error("safetensors: " + path + ": " + name + " has " +
                               std::to_string(finish - begin) + " bytes for its shape");
    if (finish > data_size)
      throw std::runtime_error("safetensors: " + path + " is truncated: " + name + " runs past its end");
    at::Tensor t = at::empty(sizes, at::TensorOptions().dtype(type));
    in.seekg(static_cast<std::streamoff>(data_start + begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!in)
      throw std::runtime_error("safetensors: " + path + " is truncated: " + name + " runs past its end");
    tensors.push_back({name, t});
  }
  return tensors;
}

}  // namespace atl::checkpoint
