// Input bytes as a stream, read in blocks so that no input is ever held whole: a file as it is, or
// decompressed on the way from gzip (zlib) or Zstandard (libzstd). `atoll data prepare` reads every
// input through one of these, so memory stays bounded whatever the input's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace atl::runtime {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Fills up to `size` bytes of `out`; returns how many, 0 at the end only. Damaged data (a corrupt
  // or truncated compressed frame) is std::invalid_argument naming the file, the offset and a fix;
  // a file that cannot be read is std::runtime_error.
  virtual size_t read(char* out, size_t size) = 0;
  // Bytes of the file consumed so far (compressed bytes for a compressed stream): progress.
  virtual int64_t consumed() const = 0;
};

// The file's bytes; std::runtime_error naming it when it cannot be opened.
std::unique_ptr<ByteStream> open_file_stream(const std::string& path);
// The decompressed bytes of a gzip file (every member of a multi-member one, as gzip -d does).
std::unique_ptr<ByteStream> open_gzip_stream(const std::string& path);
// The decompressed bytes of a Zstandard file (every frame).
std::unique_ptr<ByteStream> open_zstd_stream(const std::string& path);

// The first bytes of a file (up to `count`; fewer for a shorter one): to tell formats apart.
std::string file_head(const std::string& path, size_t count);

}  // namespace atl::runtime
