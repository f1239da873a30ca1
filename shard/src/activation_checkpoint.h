// Activation checkpointing of one unit: forward runs without recording
// activations (only the input is kept); backward recomputes the forward with
// autograd on and back-propagates through the recomputed graph (a reentrant
// backward, as torch.utils.checkpoint(use_reentrant=True)). The unit's own
// pre-backward hook (on the output) runs first, so the unit is unsharded
// again and its gradient buffer bound before the recompute; its parameters'
// AccumulateGrad post-hooks then fire as usual.
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace shard {

at::Tensor checkpointed_forward(const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& fn);

}  // namespace shard
