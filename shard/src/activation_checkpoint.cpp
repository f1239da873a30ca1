#include "activation_checkpoint.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/variable.h>

namespace shard {
namespace {

struct RecomputeBackward : torch::autograd::Node {
  std::function<at::Tensor(const at::Tensor&)> fn;
  at::Tensor input;  // detached; the only activation kept
  bool input_requires_grad = false;

  std::string name() const override { return "shard::RecomputeBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::Tensor x = input.detach();
    if (input_requires_grad) x.requires_grad_(true);
    at::Tensor out;
    {
      c10::AutoGradMode enable(true);
      out = fn(x);
    }
    input = at::Tensor();  // recomputed once
    if (grads.at(0).defined() && out.requires_grad())
      torch::autograd::backward({out}, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/false);
    return {input_requires_grad ? x.grad() : at::Tensor()};
  }
  void release_variables() override { input = at::Tensor(); }
};

}  // namespace

at::Tensor checkpointed_forward(const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(), torch::autograd::deleteNode);
  node->fn = fn;
  node->input = input.detach();
  node->input_requires_grad = input.requires_grad();
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  at::Tensor out;
  {
    c10::NoGradGuard no_grad;
    out = fn(input.detach());
    // A fresh tensor for the new history (fn may return a view or its input).
    if (out.is_view() || out.is_same(input)) out = out.clone();
  }
  torch::autograd::create_gradient_edge(out, node);
  return out;
}

}  // namespace shard
