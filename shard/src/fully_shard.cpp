#include "shard/fully_shard.h"

#include "activation_checkpoint.h"
#include "registry.h"
#include "shard/host_memory.h"
#include "runtime.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace shard {

// ---- registry ----
namespace {
std::mutex g_registry_mu;
std::unordered_map<const torch::nn::Module*, UnitRef>& registry() {
  static std::unordered_map<const torch::nn::Module*, UnitRef> r;
  return r;
}
}  // namespace

void register_unit(const torch::nn::Module* module, Runtime* rt, Unit* unit) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto [it, inserted] = registry().emplace(module, UnitRef{rt, unit});
  if (!inserted && it->second.rt != rt)
    throw std::invalid_argument("fully_shard: module is already part of another FullyShardedModel");
  it->second = UnitRef{rt, unit};
}

void unregister_runtime(Runtime* rt) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  for (auto it = registry().begin(); it != registry().end();)
    it = it->second.rt == rt ? registry().erase(it) : std::next(it);
}

UnitRef lookup_unit(const torch::nn::Module* module) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto it = registry().find(module);
  return it == registry().end() ? UnitRef{} : it->second;
}

at::Tensor forward_unit(const torch::nn::Module& module, const std::function<at::Tensor()>& fn) {
  UnitRef ref = lookup_unit(&module);
  if (!ref.rt) return fn();
  if (ref.unit->checkpoint_activations)
    throw std::logic_error("fully_shard: " + ref.unit->describe() +
                           " checkpoints activations; its forward must use forward_unit(module, input, fn)");
  ref.rt->pre_forward(ref.unit);
  at::Tensor out = fn();
  return ref.rt->post_forward(ref.unit, std::move(out));
}

at::Tensor forward_unit(const torch::nn::Module& module, const at::Tensor& input,
                        const std::function<at::Tensor(const at::Tensor&)>& fn) {
  UnitRef ref = lookup_unit(&module);
  if (!ref.rt) return fn(input);
  ref.rt->pre_forward(ref.unit);
  at::Tensor out = ref.unit->checkpoint_activations && at::GradMode::is_enabled() ? checkpointed_forward(input, fn)
                                                                                  : fn(input);
  return ref.rt->post_forward(ref.unit, std::move(out));
}

void defer_parameters(torch::nn::Module& module) {
  for (auto& p : module.parameters(/*recurse=*/true)) {
    if (!p.device().is_cpu())
      throw std::invalid_argument("defer_parameters: only CPU parameters can be deferred");
    free_storage(p);
  }
  release_free_heap();
}

bool is_deferred(const at::Tensor& param) {
  return param.defined() && param.numel() > 0 && !storage_allocated(param);
}

// ---- policy ----
// to_string(ShardingStrategy) and parse_sharding_strategy: shard/strategy_names.h.

void validate(const FullyShardOptions& o, int world_size, int local_world_size) {
  auto bad = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument("fully_shard: " + field + ": " + why);
  };
  if (world_size < 1) bad("world_size", "must be >= 1, got " + std::to_string(world_size));
  if (o.limit_all_gathers < 1) bad("limit_all_gathers", "must be >= 1, got " + std::to_string(o.limit_all_gathers));
  if (o.timeout.count() <= 0) bad("timeout", "must be positive");
  if (o.wrap.min_num_params < 0) bad("wrap.min_num_params", "must be >= 0");
  auto check_float = [&](const char* field, at::ScalarType t) {
    if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf && t != at::kDouble)
      bad(field, std::string("must be a floating dtype, got ") + c10::toString(t));
  };
  check_float("mixed_precision.param_dtype", o.mixed_precision.param_dtype);
  check_float("mixed_precision.reduce_dtype", o.mixed_precision.reduce_dtype);
  check_float("mixed_precision.buffer_dtype", o.mixed_precision.buffer_dtype);
  if (o.mixed_precision.param_dtype == at::kDouble) bad("mixed_precision.param_dtype", "float64 is not supported");
  if (!o.compute_device.is_cpu()) {
#ifndef GREENSHARD_CUDA
    bad("compute_device", std::string("is ") + o.compute_device.str() +
                              ", but this build has no GPU support (configure with GREENSHARD_CUDA=ON)");
#else
    if (!o.compute_device.is_cuda()) bad("compute_device", "must be cpu or cuda, got " + o.compute_device.str());
#endif
  }
  if (o.hybrid_shard_group_size < 0) bad("hybrid_shard_group_size", "must be >= 0");
  if (o.strategy == ShardingStrategy::kHybridShard) {
    int g = o.hybrid_shard_group_size > 0 ? o.hybrid_shard_group_size : local_world_size;
    if (g < 1 || world_size % g != 0)
      bad("hybrid_shard_group_size", std::to_string(g) + " does not divide the world size " + std::to_string(world_size));
  } else if (o.hybrid_shard_group_size != 0) {
    bad("hybrid_shard_group_size", std::string("is only valid with HYBRID_SHARD, strategy is ") + to_string(o.strategy));
  }
}

// ---- FullyShardedModel ----
FullyShardedModel::FullyShardedModel(std::shared_ptr<torch::nn::Module> root, std::shared_ptr<Rendezvous> rdzv,
                                     FullyShardOptions options)
    : rt_(std::make_unique<Runtime>(std::move(root), std::move(rdzv), std::move(options))) {}

FullyShardedModel::~FullyShardedModel() = default;

torch::nn::Module& FullyShardedModel::module() { return rt_->module(); }
const FullyShardOptions& FullyShardedModel::options() const { return rt_->options(); }

std::vector<at::Tensor> FullyShardedModel::parameters() {
  std::vector<at::Tensor> out;
  for (auto& u : rt_->units()) out.push_back(u->master());
  return out;
}

FullyShardedModel::NoSyncGuard::NoSyncGuard(Runtime* rt) : rt_(rt) { rt_->set_no_sync(true); }
FullyShardedModel::NoSyncGuard::~NoSyncGuard() { rt_->set_no_sync(false); }
FullyShardedModel::NoSyncGuard FullyShardedModel::no_sync() { return NoSyncGuard(rt_.get()); }

std::map<std::string, at::Tensor> FullyShardedModel::full_parameters() {
  std::map<std::string, at::Tensor> out;
  rt_->for_each_full_unit([&](Unit& u, const std::vector<at::Tensor>& values) {
    for (size_t i = 0; i < values.size(); ++i) out[u.layout().entries()[i].name] = values[i];
  });
  return out;
}

MemoryStats FullyShardedModel::memory() const {
  MemoryStats s;
  for (const auto& u : rt_->units()) {
    s.sharded_param_bytes += tensor_bytes(const_cast<Unit&>(*u).master());
    const auto& g = const_cast<Unit&>(*u).master().grad();
    if (g.defined()) s.sharded_grad_bytes += tensor_bytes(g);
  }
  s.unsharded_current_bytes = rt_->memory().current;
  s.unsharded_peak_bytes = rt_->memory().peak;
  s.largest_unit_unsharded_bytes = rt_->largest_unit_bytes();
  s.total_param_numel = rt_->total_param_numel();
  s.offloaded = rt_->options().offload.offload_params;
  return s;
}

std::vector<at::Tensor> FullyShardedModel::shard_masks(
    const std::function<bool(const std::string& name, at::IntArrayRef shape)>& select) const {
  std::vector<at::Tensor> out;
  const int64_t group_rank = rt_->shard_group()->rank();
  for (const auto& u : rt_->units()) {
    const FlatParamLayout& layout = u->layout();
    // This rank's shard is [lo, lo + n) of the padded flat parameter (the
    // whole of it in a one-rank shard group: NO_SHARD, HYBRID_SHARD with
    // groups of one).
    const int64_t n = layout.shard_numel(), lo = group_rank * n;
    const at::Tensor& master = const_cast<Unit&>(*u).master();
    at::Tensor mask = at::zeros({n}, at::TensorOptions().dtype(at::kBool).device(master.device()));
    for (const auto& e : layout.entries()) {
      const int64_t begin = std::max(e.offset, lo), end = std::min(e.offset + e.numel, lo + n);
      if (begin < end && select(e.name, e.shape)) mask.narrow(0, begin - lo, end - begin).fill_(true);
    }
    out.push_back(std::move(mask));
  }
  return out;
}

void FullyShardedModel::reset_peak_memory() { rt_->memory().reset_peak(); }

std::vector<UnitInfo> FullyShardedModel::units() const {
  std::vector<UnitInfo> out;
  for (const auto& u : rt_->units()) {
    UnitInfo i;
    i.name = u->name();
    i.numel = u->layout().numel();
    i.padded_numel = u->layout().padded_numel();
    i.shard_numel = u->layout().shard_numel();
    for (const auto& e : u->layout().entries()) i.param_names.push_back(e.name);
    i.activation_checkpointing = u->checkpoint_activations;
    out.push_back(std::move(i));
  }
  return out;
}

CommunicatorPtr FullyShardedModel::shard_group() const { return rt_->shard_group(); }
CommunicatorPtr FullyShardedModel::replicate_group() const { return rt_->replicate_group(); }

}  // namespace shard
