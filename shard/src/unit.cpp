#include "unit.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>

#include <sstream>
#include <stdexcept>

namespace shard {

const char* to_string(ShardState s) {
  switch (s) {
    case ShardState::kSharded: return "SHARDED";
    case ShardState::kUnsharding: return "UNSHARDING";
    case ShardState::kUnsharded: return "UNSHARDED";
  }
  return "?";
}

const char* to_string(TrainingState s) {
  switch (s) {
    case TrainingState::kIdle: return "IDLE";
    case TrainingState::kForward: return "FORWARD";
    case TrainingState::kBackwardPre: return "BACKWARD_PRE";
    case TrainingState::kBackwardPost: return "BACKWARD_POST";
  }
  return "?";
}

Unit::Unit(int index, std::string name, const torch::nn::Module* module,
           FlatParamLayout layout, UnitComms comms, MixedPrecisionPolicy mp,
           bool reshard_after_forward, MemoryTracker* memory, UnitPlacement placement)
    : index_(index),
      name_(std::move(name)),
      module_(module),
      layout_(std::move(layout)),
      comms_(std::move(comms)),
      mp_(mp),
      reshard_after_forward_(reshard_after_forward),
      memory_(memory),
      placement_(placement) {
  // With offload the parameters never alias the (host) master.
  always_unsharded_ = comms_.all_gather->size() == 1 && mp_.param_dtype == at::kFloat && !placement_.offload;
}

Unit::~Unit() = default;

std::string Unit::describe() const { return "unit '" + (name_.empty() ? std::string("<root>") : name_) + "'"; }

CollectiveOptions Unit::opts(const char* what) const {
  CollectiveOptions o;
  o.timeout = comms_.timeout;
  o.tag = describe() + " " + what;
  return o;
}

int64_t Unit::param_bytes() const {
  return layout_.padded_numel() * static_cast<int64_t>(c10::elementSize(mp_.param_dtype));
}
int64_t Unit::grad_bytes() const { return param_bytes(); }

int64_t Unit::unsharded_bytes_now() const {
  int64_t b = 0;
  if (!always_unsharded_ && shard_state_ != ShardState::kSharded) b += param_bytes();
  if (grad_flat_.defined() && storage_allocated(grad_flat_)) b += grad_bytes();
  return b;
}

void Unit::init(const at::Tensor& full_flat) {
  c10::NoGradGuard no_grad;
  const int group_rank = comms_.all_gather->rank();
  const int64_t n = layout_.shard_numel();
  const c10::Device master_device = placement_.offload ? c10::Device(c10::kCPU) : placement_.compute;
  if (always_unsharded_) {
    master_ = full_flat.to(master_device, at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    unsharded_ = master_;  // the parameters alias the master directly
    shard_state_ = ShardState::kUnsharded;
  } else {
    master_ = full_flat.narrow(0, group_rank * n, n).to(master_device, at::kFloat, false, /*copy=*/true);
    // Allocated only to create the views (never touched, so never
    // resident), freed below; the first all-gather allocates it again.
    unsharded_ = at::empty({layout_.padded_numel()}, at::TensorOptions().dtype(mp_.param_dtype).device(placement_.compute));
    shard_state_ = ShardState::kSharded;
  }
  master_.set_requires_grad(true);
  layout_.bind_views(unsharded_);
  if (!always_unsharded_) free_storage(unsharded_);
}

void Unit::unshard_async() {
  if (shard_state_ != ShardState::kSharded) return;
  c10::NoGradGuard no_grad;
  alloc_storage(unsharded_);
  memory_->add(param_bytes());
  at::Tensor src = master_.detach();
  if (placement_.offload)  // host -> compute device staging copy
    src = src.to(placement_.compute, mp_.param_dtype, /*non_blocking=*/true, /*copy=*/true);
  else if (mp_.param_dtype != at::kFloat)
    src = src.to(mp_.param_dtype);
  gather_src_ = src;
  gather_work_ = comms_.all_gather->all_gather_into(unsharded_, gather_src_, opts("all-gather"));
  shard_state_ = ShardState::kUnsharding;
}

void Unit::wait_unshard() {
  if (shard_state_ == ShardState::kSharded) unshard_async();
  if (shard_state_ == ShardState::kUnsharding) {
    gather_work_->wait();
    gather_work_.reset();
    gather_src_.reset();
    shard_state_ = ShardState::kUnsharded;
  }
}

void Unit::reshard() {
  if (always_unsharded_ || shard_state_ == ShardState::kSharded) return;
  if (shard_state_ == ShardState::kUnsharding) {
    // Never free a buffer a collective is writing into.
    gather_work_->wait();
    gather_work_.reset();
    gather_src_.reset();
  }
  free_storage(unsharded_);
  memory_->sub(param_bytes());
  shard_state_ = ShardState::kSharded;
}

void Unit::prepare_grads() {
  if (grads_live_) return;
  c10::NoGradGuard no_grad;
  if (!grad_flat_.defined()) {
    grad_flat_ = at::zeros({layout_.padded_numel()},
                           at::TensorOptions().dtype(mp_.param_dtype).device(placement_.compute));
  } else {
    alloc_storage(grad_flat_);
    grad_flat_.zero_();
  }
  memory_->add(grad_bytes());
  auto views = layout_.views(grad_flat_);
  for (size_t i = 0; i < views.size(); ++i) {
    // AccumulateGrad adds in place into a defined .grad (grad mode is off in
    // backward), so each parameter's gradient lands in the flat buffer.
    layout_.entries()[i].param.mutable_grad() = views[i];
  }
  grads_live_ = true;
}

void Unit::free_grads() {
  for (auto& e : layout_.entries()) e.param.mutable_grad() = at::Tensor();
  if (grad_flat_.defined() && storage_allocated(grad_flat_)) {
    free_storage(grad_flat_);
    memory_->sub(grad_bytes());
  }
  grads_live_ = false;
}

void Unit::start_reduction() {
  if (!grads_live_) throw std::logic_error(describe() + ": start_reduction without gradients");
  if (stage_ != Stage::kNone) throw std::logic_error(describe() + ": reduction already pending");
  c10::NoGradGuard no_grad;
  reduce_in_ = grad_flat_.scalar_type() == mp_.reduce_dtype ? grad_flat_ : grad_flat_.to(mp_.reduce_dtype);
  // Unbind the parameters' .grad now: the buffer belongs to the collective.
  for (auto& e : layout_.entries()) e.param.mutable_grad() = at::Tensor();
  if (!reduce_in_.is_same(grad_flat_)) free_grads();
  if (comms_.reduce_scatter->size() > 1) {
    reduce_out_ = at::empty({layout_.shard_numel()},
                            at::TensorOptions().dtype(mp_.reduce_dtype).device(placement_.compute));
    reduce_work_ = comms_.reduce_scatter->reduce_scatter(reduce_out_, reduce_in_, ReduceOp::kAvg,
                                                         opts("reduce-scatter"));
    stage_ = Stage::kReduceScatter;
  } else if (comms_.replicate) {
    // One-rank shard group (NO_SHARD): nothing to scatter; start the
    // all-reduce across replicas right away (post-backward order is the same
    // on every rank).
    reduce_out_ = reduce_in_;
    reduce_work_ = comms_.replicate->all_reduce(reduce_out_, ReduceOp::kAvg, opts("all-reduce"));
    stage_ = Stage::kAllReduce;
  } else {
    reduce_out_ = reduce_in_;
    reduce_work_ = completed_work();
    stage_ = Stage::kAllReduce;
  }
}

bool Unit::advance_reduction(bool block) {
  if (stage_ == Stage::kNone) return true;
  c10::NoGradGuard no_grad;
  if (stage_ == Stage::kReduceScatter) {
    if (!block && !reduce_work_->is_completed()) return false;
    reduce_work_->wait();
    // The unsharded gradient is no longer needed unless it is the output.
    if (!reduce_out_.is_same(grad_flat_) && grads_live_) free_grads();
    reduce_in_.reset();
    if (comms_.replicate) {
      reduce_work_ = comms_.replicate->all_reduce(reduce_out_, ReduceOp::kAvg, opts("all-reduce"));
      stage_ = Stage::kAllReduce;
    } else {
      reduce_work_ = completed_work();
      stage_ = Stage::kAllReduce;
    }
  }
  if (!block && !reduce_work_->is_completed()) return false;
  reduce_work_->wait();
  reduce_work_.reset();
  at::Tensor g = reduce_out_.scalar_type() == at::kFloat ? reduce_out_ : reduce_out_.to(at::kFloat);
  if (placement_.offload)  // compute device -> host: the optimizer steps there
    g = g.to(c10::Device(c10::kCPU), at::kFloat, /*non_blocking=*/false, /*copy=*/true);
  if (!master_.grad().defined()) {
    if (g.is_same(grad_flat_)) {
      // NO_SHARD in fp32: the reduced buffer becomes the sharded gradient.
      memory_->sub(grad_bytes());
      grad_flat_ = at::Tensor();
      grads_live_ = false;
    }
    master_.mutable_grad() = g;
  } else {
    master_.mutable_grad().add_(g);
  }
  if (grads_live_) free_grads();  // (offload copied it out)
  reduce_in_.reset();
  reduce_out_.reset();
  stage_ = Stage::kNone;
  return true;
}

std::vector<at::Tensor> Unit::copy_full_params() const {
  if (shard_state_ != ShardState::kUnsharded)
    throw std::logic_error(describe() + ": copy_full_params while " + to_string(shard_state_));
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const auto& v : layout_.views(unsharded_)) out.push_back(v.to(at::kFloat).clone());
  return out;
}

}  // namespace shard
