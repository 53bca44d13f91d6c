// gzip input through zlib's inflate, member after member.
#include <zlib.h>

#include <stdexcept>
#include <vector>

#include "runtime/data/byte_stream.h"

namespace atl::runtime {
namespace {

constexpr size_t kCompressedBlock = size_t{1} << 16;

class GzipStream : public ByteStream {
 public:
  explicit GzipStream(const std::string& path)
      : path_(path), file_(open_file_stream(path)), in_(kCompressedBlock) {
    // 15 + 16: a gzip header and trailer around the deflate data, windows up to 32 KB.
    if (inflateInit2(&z_, 15 + 16) != Z_OK)
      throw std::runtime_error("data prepare: zlib could not start inflating " + path);
  }
  ~GzipStream() override { inflateEnd(&z_); }
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  size_t read(char* out, size_t size) override {
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(size);
    while (z_.avail_out == size) {
      if (z_.avail_in == 0 && !refill()) {
        if (member_open_) fail("ends in the middle of a gzip member (truncated)");
        return 0;
      }
      const int status = inflate(&z_, Z_NO_FLUSH);
      member_open_ = true;
      if (status == Z_STREAM_END) {
        member_open_ = false;
        inflateReset(&z_);  // a next member, if any, starts fresh
      } else if (status != Z_OK && status != Z_BUF_ERROR) {
        fail(std::string("is corrupt (zlib: ") + (z_.msg ? z_.msg : "error " + std::to_string(status)) + ")");
      }
    }
    return size - z_.avail_out;
  }
  int64_t consumed() const override { return file_->consumed(); }

 private:
  bool refill() {
    const size_t got = file_->read(reinterpret_cast<char*>(in_.data()), in_.size());
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }
  [[noreturn]] void fail(const std::string& problem) const {
    throw std::invalid_argument("data prepare: input " + path_ + " " + problem + " near compressed byte " +
                                std::to_string(file_->consumed()) +
                                "; check it with `gzip -t` and re-download or recompress it");
  }

  std::string path_;
  std::unique_ptr<ByteStream> file_;
  std::vector<Bytef> in_;
  z_stream z_{};
  bool member_open_ = false;
};

}  // namespace

std::unique_ptr<ByteStream> open_gzip_stream(const std::string& path) {
  return std::make_unique<GzipStream>(path);
}

}  // namespace atl::runtime
