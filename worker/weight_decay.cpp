#include "worker/weight_decay.h"

#include <c10/core/GradMode.h>
#include <ATen/ATen.h>

#include <stdexcept>

namespace greenshard {

bool decays(const std::string&, at::IntArrayRef shape) { return shape.size() >= 2; }

MaskedWeightDecay::MaskedWeightDecay(shard::FullyShardedModel& fsdp, double weight_decay)
    : params_(fsdp.parameters()), masks_(fsdp.shard_masks(decays)), wd_(weight_decay) {
  if (!(weight_decay >= 0)) throw std::invalid_argument("weight_decay: must be >= 0");
}

void MaskedWeightDecay::apply(double lr) {
  if (wd_ == 0) return;
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;  // as torch::optim::AdamW::step
    // The factor rounded to p's dtype, as AdamW's p.mul_(1 - lr * wd)
    // rounds it; 1 where the mask is false.
    const at::Tensor factor = at::scalar_tensor(1 - lr * wd_, p.options());
    const at::Tensor one = at::scalar_tensor(1.0, p.options());
    p.mul_(at::where(masks_[i], factor, one));
  }
}

int64_t MaskedWeightDecay::decayed_numel() const {
  int64_t n = 0;
  for (const auto& m : masks_) n += m.sum().item<int64_t>();
  return n;
}

}  // namespace greenshard
