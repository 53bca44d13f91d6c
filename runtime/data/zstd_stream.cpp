// Zstandard input through libzstd's streaming decompression, frame after frame.
#include <zstd.h>

#include <stdexcept>
#include <vector>

#include "runtime/data/byte_stream.h"

namespace atl::runtime {
namespace {

class ZstdStream : public ByteStream {
 public:
  explicit ZstdStream(const std::string& path)
      : path_(path), file_(open_file_stream(path)), in_(ZSTD_DStreamInSize()), z_(ZSTD_createDCtx()) {
    if (!z_) throw std::runtime_error("data prepare: libzstd could not start decompressing " + path);
  }
  ~ZstdStream() override { ZSTD_freeDCtx(z_); }
  ZstdStream(const ZstdStream&) = delete;
  ZstdStream& operator=(const ZstdStream&) = delete;

  size_t read(char* out, size_t size) override {
    ZSTD_outBuffer output{out, size, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        const size_t got = file_->read(in_.data(), in_.size());
        if (got == 0) {
          if (frame_open_) fail("ends in the middle of a zstd frame (truncated)");
          return 0;
        }
        input_ = {in_.data(), got, 0};
      }
      const size_t hint = ZSTD_decompressStream(z_, &output, &input_);
      if (ZSTD_isError(hint)) fail(std::string("has a corrupt zstd frame (") + ZSTD_getErrorName(hint) + ")");
      frame_open_ = hint != 0;  // 0: a frame just ended
    }
    return output.pos;
  }
  int64_t consumed() const override { return file_->consumed(); }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw std::invalid_argument("data prepare: input " + path_ + " " + problem + " near compressed byte " +
                                std::to_string(file_->consumed()) +
                                "; check it with `zstd -t` and re-download or recompress it");
  }

  std::string path_;
  std::unique_ptr<ByteStream> file_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  ZSTD_DCtx* z_;
  bool frame_open_ = false;
};

}  // namespace

std::unique_ptr<ByteStream> open_zstd_stream(const std::string& path) {
  return std::make_unique<ZstdStream>(path);
}

}  // namespace atl::runtime
