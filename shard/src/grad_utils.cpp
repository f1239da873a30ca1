// Gradient utilities over sharded flat gradients.
#include "runtime.h"
#include "shard/fully_shard.h"

#include <c10/core/GradMode.h>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace shard {

double FullyShardedModel::clip_grad_norm(double max_norm, double norm_type) {
  if (!(max_norm > 0)) throw std::invalid_argument("clip_grad_norm: max_norm must be > 0");
  const bool inf = std::isinf(norm_type);
  if (!inf && norm_type != 2.0) throw std::invalid_argument("clip_grad_norm: norm_type must be 2 or inf");
  rt_->finish_all();
  c10::NoGradGuard no_grad;
  // Each shard group holds the whole gradient once (replicas are equal), so
  // the reduction runs over the shard group only.
  // On the device the sharded gradients live on (the host with offload).
  const auto device = rt_->units().front()->master().device();
  at::Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  std::vector<at::Tensor> grads;
  for (auto& u : rt_->units()) {
    const auto& g = u->master().grad();
    if (!g.defined()) continue;
    grads.push_back(g);
    if (inf) local = at::maximum(local, g.abs().max().to(at::kDouble).reshape({1}));
    else local += g.to(at::kDouble).pow(2).sum();
  }
  auto comm = rt_->shard_group();
  if (comm->size() > 1) {
    if (inf) {
      // max via gather: tiny.
      at::Tensor all = at::empty({comm->size()}, local.options());  // (on the gradients' device)
      comm->all_gather_into(all, local, {rt_->options().timeout, "clip_grad_norm"})->wait();
      local = all.max().reshape({1});
    } else {
      comm->all_reduce(local, ReduceOp::kSum, {rt_->options().timeout, "clip_grad_norm"})->wait();
    }
  }
  const double total = inf ? local.item<double>() : std::sqrt(local.item<double>());
  // Same formula as torch::nn::utils::clip_grad_norm_.
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (auto& g : grads) g.mul_(coef);
  return total;
}

}  // namespace shard
