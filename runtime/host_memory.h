// Host allocator tuning for training loops on CPU.
#pragma once

#include <cstdint>

namespace atl::runtime {

// Keeps freed large blocks in the heap instead of returning them to the OS. glibc serves blocks
// above its mmap threshold with fresh mmaps, and every step then pays page faults to touch its
// activations again (measured: a 16 MiB elementwise op 24 ms instead of 0.7 ms, a whole step
// 1.02 s -> 0.61 s on one core). Training allocates the same sizes every step, so a heap that
// keeps them is the caching allocator CPU LibTorch lacks. Idempotent.
void keep_freed_memory_in_heap();

}  // namespace atl::runtime
