// FlatParam: the layout of one unit's parameters in one contiguous, padded
// flat buffer, and the free/refill of a buffer's storage that keeps every
// tensor object (and autograd's saved references) alive.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

namespace shard {

struct FlatParamEntry {
  std::string name;              // qualified name in the root module
  std::vector<int64_t> shape;
  int64_t offset = 0;            // in elements, into the flat buffer
  int64_t numel = 0;
  at::Tensor param;              // the module's parameter (same TensorImpl)
};

class FlatParamLayout {
 public:
  // Lays `params` out in order; pads the total to a multiple of group_size
  // (>= 1), and to at least group_size elements so every shard is non-empty.
  FlatParamLayout(std::vector<FlatParamEntry> params, int group_size);

  const std::vector<FlatParamEntry>& entries() const { return entries_; }
  std::vector<FlatParamEntry>& entries() { return entries_; }
  int64_t numel() const { return numel_; }            // unpadded
  int64_t padded_numel() const { return padded_numel_; }
  int64_t shard_numel() const { return padded_numel_ / group_size_; }
  int group_size() const { return group_size_; }

  // Copies the parameters' current values into a new flat fp32 tensor
  // (padding zero).
  at::Tensor flatten_values() const;
  // A new flat fp32 tensor whose parameter views init(name, view) fills
  // (padding zero); the parameters themselves are not read.
  at::Tensor materialize(const std::function<void(const std::string&, at::Tensor&)>& init) const;
  // Points every parameter's data at its view of `flat` (dtype may differ
  // from the parameters' current dtype). Autograd identity is kept.
  void bind_views(const at::Tensor& flat) const;
  // Views of `flat` shaped like each parameter (for gradients).
  std::vector<at::Tensor> views(const at::Tensor& flat) const;

 private:
  std::vector<FlatParamEntry> entries_;
  int64_t numel_ = 0;
  int64_t padded_numel_ = 0;
  int group_size_ = 1;
};

// Storage of a (flat) tensor: free it to zero bytes, or reallocate it, in
// place: the StorageImpl and every tensor viewing it stay valid, no version
// counter is bumped. Both are safe to call twice.
void free_storage(const at::Tensor& t);
void alloc_storage(const at::Tensor& t);  // to t.numel() * element size
bool storage_allocated(const at::Tensor& t);
int64_t tensor_bytes(const at::Tensor& t);  // numel * element size


}  // namespace shard
