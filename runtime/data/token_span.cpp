#include "runtime/data/token_span.h"

#include <algorithm>
#include <stdexcept>

namespace atl::runtime {

template <typename Fn>
void TokenSpan::for_each(int64_t begin, int64_t count, Fn fn) const {
  auto walk = [&](auto zero) {
    using T = decltype(zero);
    const unsigned char* p = body_ + begin * static_cast<int64_t>(sizeof(T));
    for (int64_t i = 0; i < count; ++i, p += sizeof(T)) fn(i, static_cast<uint32_t>(load_unaligned<T>(p)));
  };
  if (bytes_per_token_ == 2)
    walk(uint16_t{});
  else
    walk(uint32_t{});
}

void TokenSpan::check_range(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin > count_ - count)
    throw std::out_of_range("data: " + path_ + ": tokens [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") are outside the shard's " +
                            std::to_string(count_) + " tokens");
}

uint32_t TokenSpan::token(int64_t i) const {
  check_range(i, 1);
  uint32_t value = 0;
  for_each(i, 1, [&](int64_t, uint32_t t) { value = t; });
  return value;
}

void TokenSpan::read(int64_t begin, int64_t count, int64_t* out) const {
  check_range(begin, count);
  for_each(begin, count, [&](int64_t i, uint32_t t) { out[i] = t; });
}

uint32_t TokenSpan::max_token() const {
  uint32_t best = 0;
  for_each(0, count_, [&](int64_t, uint32_t t) { best = std::max(best, t); });
  return best;
}

}  // namespace atl::runtime
