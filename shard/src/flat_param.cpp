#include "flat_param.h"

#include <c10/core/GradMode.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>

#include <stdexcept>

#ifdef GREENSHARD_CUDA
#include "cuda_storage.h"
#endif

namespace shard {

FlatParamLayout::FlatParamLayout(std::vector<FlatParamEntry> params, int group_size)
    : entries_(std::move(params)), group_size_(group_size) {
  if (group_size_ < 1) throw std::invalid_argument("FlatParamLayout: group_size must be >= 1");
  int64_t offset = 0;
  for (auto& e : entries_) {
    e.offset = offset;
    e.numel = 1;
    for (auto d : e.shape) e.numel *= d;
    offset += e.numel;
  }
  numel_ = offset;
  int64_t padded = (numel_ + group_size_ - 1) / group_size_ * group_size_;
  padded_numel_ = std::max<int64_t>(padded, group_size_);
}

at::Tensor FlatParamLayout::flatten_values() const {
  c10::NoGradGuard no_grad;
  at::Tensor flat = at::zeros({padded_numel_}, at::kFloat);
  for (const auto& e : entries_) {
    flat.narrow(0, e.offset, e.numel).copy_(e.param.detach().reshape({-1}));
  }
  return flat;
}

at::Tensor FlatParamLayout::materialize(const std::function<void(const std::string&, at::Tensor&)>& init) const {
  c10::NoGradGuard no_grad;
  at::Tensor flat = at::zeros({padded_numel_}, at::kFloat);
  for (const auto& e : entries_) {
    at::Tensor view = flat.narrow(0, e.offset, e.numel).view(e.shape);
    init(e.name, view);
    if (view.data_ptr() != flat.narrow(0, e.offset, e.numel).data_ptr() || !view.sizes().equals(e.shape))
      throw std::invalid_argument("fully_shard: param_init for '" + e.name +
                                  "' must fill the tensor it is given in place, not replace it");
  }
  return flat;
}

std::vector<at::Tensor> FlatParamLayout::views(const at::Tensor& flat) const {
  std::vector<at::Tensor> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(flat.narrow(0, e.offset, e.numel).view(e.shape));
  return out;
}

void FlatParamLayout::bind_views(const at::Tensor& flat) const {
  c10::NoGradGuard no_grad;
  auto v = views(flat);
  for (size_t i = 0; i < entries_.size(); ++i) {
    // Like `p.data = view` in Python: the parameter keeps its autograd
    // identity (leaf, grad accumulator) and now aliases the flat storage.
    entries_[i].param.set_data(v[i]);
  }
}

int64_t tensor_bytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

bool storage_allocated(const at::Tensor& t) {
  return t.storage().nbytes() > 0;
}

void free_storage(const at::Tensor& t) {
#ifdef GREENSHARD_CUDA
  if (t.device().is_cuda()) {
    if (storage_allocated(t)) detail::resize_storage_bytes_cuda(t.storage().unsafeGetStorageImpl(), 0);
    return;
  }
#endif
  TORCH_CHECK(t.device().is_cpu(), "free_storage: only CPU tensors are supported in this build");
  if (!storage_allocated(t)) return;
  at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), 0);
}

void alloc_storage(const at::Tensor& t) {
#ifdef GREENSHARD_CUDA
  if (t.device().is_cuda()) {
    const size_t want = static_cast<size_t>(t.storage_offset() * t.element_size() + tensor_bytes(t));
    if (t.storage().nbytes() < want) detail::resize_storage_bytes_cuda(t.storage().unsafeGetStorageImpl(), want);
    return;
  }
#endif
  TORCH_CHECK(t.device().is_cpu(), "alloc_storage: only CPU tensors are supported in this build");
  const size_t want = static_cast<size_t>(t.storage_offset() * t.element_size() + tensor_bytes(t));
  if (t.storage().nbytes() >= want) return;
  at::native::resize_bytes_cpu(t.storage().unsafeGetStorageImpl(), want);
}

}  // namespace shard
