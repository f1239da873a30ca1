// See cuda_storage.h.
#include "cuda_storage.h"

#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>

namespace shard::detail {

void resize_storage_bytes_cuda(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage != nullptr, "resize_storage_bytes_cuda: null storage");
  const c10::Device device = storage->device();
  TORCH_CHECK(device.is_cuda(), "resize_storage_bytes_cuda: storage is on ", device.str());
  TORCH_CHECK(storage->resizable(), "resize_storage_bytes_cuda: storage is not resizable");
  c10::cuda::CUDAGuard guard(device);
  if (nbytes == 0) {
    // Frees the block (the caching allocator keeps it for the stream it was
    // allocated on). Callers order that stream after every other stream
    // that used the block (Work::wait) before freeing.
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, device));
    storage->set_nbytes(0);
    return;
  }
  c10::Allocator* allocator = storage->allocator();
  if (allocator == nullptr) allocator = c10::cuda::CUDACachingAllocator::get();
  at::DataPtr fresh = allocator->allocate(nbytes);
  const size_t keep = std::min(storage->nbytes(), nbytes);
  if (keep > 0) {
    const cudaError_t e =
        cudaMemcpyAsync(fresh.get(), storage->data_ptr().get(), keep, cudaMemcpyDeviceToDevice,
                        c10::cuda::getCurrentCUDAStream(device.index()).stream());
    TORCH_CHECK(e == cudaSuccess, "resize_storage_bytes_cuda: cudaMemcpyAsync: ",
                cudaGetErrorString(e));
    // The old block goes back to the stream it was allocated on, which may
    // not be this one: wait for the copy before letting it go. (FSDP only
    // grows storages from 0 bytes, so the hot path never gets here.)
    const cudaError_t s =
        cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(device.index()).stream());
    TORCH_CHECK(s == cudaSuccess, "resize_storage_bytes_cuda: cudaStreamSynchronize: ",
                cudaGetErrorString(s));
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

}  // namespace shard::detail
