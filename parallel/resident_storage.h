// Frees and re-allocates the bytes behind a tensor while every view of it stays valid.
//
// Why: ZeRO-2/3 keep a bucket's gradients or a layer's parameters only while they are used, but the
// autograd graph and the model hold views of them across that time. Views reach their data through
// the shared StorageImpl, so swapping the storage's allocation (FSDP's storage resize to 0) frees
// the memory without invalidating a single view. Autograd version counters are not touched, so
// tensors saved for backward stay usable once the data is back.
#pragma once

#include <ATen/core/Tensor.h>

namespace atl::parallel {

// Whether `t`'s storage currently holds its bytes.
bool is_resident(const at::Tensor& t);
// Returns the storage's bytes to the allocator; reading `t` or any view is invalid until
// make_resident. The tensor must own its storage from offset 0 (a flat buffer, not a view).
void release_storage(const at::Tensor& t);
// Allocates the storage's bytes again (uninitialised) if they were released; no-op otherwise.
void make_resident(const at::Tensor& t);

}  // namespace atl::parallel
