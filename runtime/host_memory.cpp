#include "runtime/host_memory.h"

#include <malloc.h>

namespace atl::runtime {

void keep_freed_memory_in_heap() {
  // glibc refuses mmap thresholds above half its heap size (32 MiB on 64-bit): use that maximum,
  // so only blocks larger than 32 MiB still come straight from mmap.
  constexpr int kLargestHeapBlock = 32 * 1024 * 1024;
  constexpr int kNeverTrim = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock);
  mallopt(M_TRIM_THRESHOLD, kNeverTrim);
}

}  // namespace atl::runtime
