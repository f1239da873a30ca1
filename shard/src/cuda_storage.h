// Internal: in-place free / reallocation of a CUDA tensor's storage (the GPU
// counterpart of at::native::resize_bytes_cpu). GREENSHARD_CUDA builds only.
#pragma once

#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace shard::detail {

// Resizes `storage` (a CUDA storage) to `nbytes` in place: the StorageImpl,
// and every tensor viewing it, stay valid; no version counter is bumped.
// 0 frees the block (returned to the caching allocator on the stream it was
// allocated on); a new block comes from the storage's allocator (the CUDA
// caching allocator) on the current stream of the storage's device. The
// first min(old, new) bytes are kept (copied on the current stream).
void resize_storage_bytes_cuda(c10::StorageImpl* storage, size_t nbytes);

}  // namespace shard::detail
