#include "parallel/resident_storage.h"

#include <c10/core/StorageImpl.h>

#include <stdexcept>

namespace atl::parallel {
namespace {

size_t full_bytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// LibTorch 2.x has no C++ operator for resizing a storage (Python's `untyped_storage().resize_()`,
// which FSDP uses, and inductor::resize_storage_bytes_ are registered by libtorch_python), so the
// storage's allocation is swapped through StorageImpl's public setters, with the storage's own
// allocator: the CPU allocator for host buffers, the CUDA caching allocator for device ones.
c10::StorageImpl& storage_of(const at::Tensor& t) {
  if (t.storage_offset() != 0)
    throw std::invalid_argument("resident_storage: only whole flat buffers can be released, not views");
  return *t.storage().unsafeGetStorageImpl();
}

}  // namespace

bool is_resident(const at::Tensor& t) {
  return t.numel() == 0 || t.storage().nbytes() >= full_bytes(t);
}

void release_storage(const at::Tensor& t) {
  c10::StorageImpl& storage = storage_of(t);
  storage.set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage.set_nbytes(0);
}

void make_resident(const at::Tensor& t) {
  if (is_resident(t)) return;
  c10::StorageImpl& storage = storage_of(t);
  const size_t bytes = full_bytes(t);
  storage.set_data_ptr_noswap(storage.allocator()->allocate(bytes));
  storage.set_nbytes(bytes);
}

}  // namespace atl::parallel
