#include "runtime.h"

#include "registry.h"
#include "shard/host_memory.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <map>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace shard {
namespace {

// Runs after a parameter's AccumulateGrad node: the gradient is in the flat
// buffer.
struct AccumulateGradHook : torch::autograd::FunctionPostHook {
  AccumulateGradHook(Runtime* rt, Unit* u) : rt(rt), u(u) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    rt->grad_accumulated(u);
    return outputs;
  }
  Runtime* rt;
  Unit* u;
};

bool is_prefix_path(const std::string& unit_path, const std::string& module_path) {
  if (unit_path.empty()) return true;
  if (module_path.size() < unit_path.size()) return false;
  if (module_path.compare(0, unit_path.size(), unit_path) != 0) return false;
  return module_path.size() == unit_path.size() || module_path[unit_path.size()] == '.';
}

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

int64_t mark_size_based(const std::string& path, torch::nn::Module& m, int64_t min_numel,
                        std::vector<std::string>& out) {
  int64_t sum = 0;
  for (const auto& p : m.named_parameters(/*recurse=*/false)) sum += p.value().numel();
  for (const auto& c : m.named_children()) sum += mark_size_based(join(path, c.key()), *c.value(), min_numel, out);
  if (!path.empty() && sum >= min_numel) {
    out.push_back(path);
    return 0;
  }
  return sum;
}

std::atomic<int> g_instances{0};

// GREENSHARD_TRACE=1: one stderr line per runtime event (debugging aid).
bool trace_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GREENSHARD_TRACE");
    return v && std::string(v) == "1";
  }();
  return on;
}

}  // namespace

Runtime::Runtime(std::shared_ptr<torch::nn::Module> root, std::shared_ptr<Rendezvous> rdzv,
                 FullyShardOptions options)
    : root_(std::move(root)), rdzv_(std::move(rdzv)), options_(std::move(options)) {
  if (!root_) throw std::invalid_argument("fully_shard: module is null");
  if (!rdzv_) throw std::invalid_argument("fully_shard: rendezvous is null");
  const auto& info = rdzv_->info();
  validate(options_, info.world_size, info.local_world_size);

  // Shard group of G consecutive ranks; replicate group across them.
  const int world = info.world_size, rank = info.rank;
  int g = world;
  if (options_.strategy == ShardingStrategy::kNoShard) g = 1;
  if (options_.strategy == ShardingStrategy::kHybridShard)
    g = options_.hybrid_shard_group_size > 0 ? options_.hybrid_shard_group_size : info.local_world_size;
  const int base = rank / g * g;
  std::vector<int> shard_ranks, rep_ranks;
  for (int r = base; r < base + g; ++r) shard_ranks.push_back(r);
  for (int r = rank % g; r < world; r += g) rep_ranks.push_back(r);
  const std::string id = "fsdp" + std::to_string(g_instances.fetch_add(1));
  // Gloo for CPU compute, NCCL for CUDA (GREENSHARD_CUDA builds).
  const Backend backend = backend_for(options_.compute_device);
  std::optional<c10::DeviceGuard> device;  // NCCL uses the current device
  if (options_.compute_device.is_cuda()) device.emplace(options_.compute_device);
  shard_ag_ = rdzv_->new_group(id + "/ag/" + std::to_string(base), shard_ranks, backend);
  shard_rs_ = rdzv_->new_group(id + "/rs/" + std::to_string(base), shard_ranks, backend);
  if (rep_ranks.size() > 1)
    replicate_ = rdzv_->new_group(id + "/rep/" + std::to_string(rank % g), rep_ranks, backend);
  build_units();
}

void Runtime::build_units() {
  c10::NoGradGuard no_grad;
  // 1. Which modules are units.
  auto modules = root_->named_modules("", /*include_self=*/true);
  std::vector<std::string> unit_paths{""};
  if (options_.wrap.predicate) {
    for (const auto& item : modules)
      if (!item.key().empty() && options_.wrap.predicate(item.key(), *item.value()))
        unit_paths.push_back(item.key());
  } else if (options_.wrap.min_num_params > 0) {
    std::vector<std::string> marked;
    mark_size_based("", *root_, options_.wrap.min_num_params, marked);
    for (const auto& item : modules)  // keep module order
      if (std::find(marked.begin(), marked.end(), item.key()) != marked.end()) unit_paths.push_back(item.key());
  }

  // 2. Each parameter (once, even when registered in several modules) goes
  //    to the lowest unit containing every module that registers it.
  struct Owned {
    std::string name;
    at::Tensor param;
    std::vector<std::string> module_paths;
  };
  std::vector<Owned> params;
  std::unordered_map<const c10::TensorImpl*, size_t> seen;
  for (const auto& item : modules) {
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      const auto* impl = p.value().unsafeGetTensorImpl();
      auto it = seen.find(impl);
      if (it == seen.end()) {
        seen.emplace(impl, params.size());
        params.push_back({join(item.key(), p.key()), p.value(), {item.key()}});
      } else {
        params[it->second].module_paths.push_back(item.key());
      }
    }
  }
  std::vector<std::vector<FlatParamEntry>> per_unit(unit_paths.size());
  for (auto& p : params) {
    if (!p.param.requires_grad())
      throw std::invalid_argument("fully_shard: parameter '" + p.name +
                                  "' does not require grad; frozen parameters are not supported");
    if (!p.param.device().is_cpu() || p.param.scalar_type() != at::kFloat)
      throw std::invalid_argument("fully_shard: parameter '" + p.name + "' must be a float32 CPU tensor before sharding");
    if (is_deferred(p.param) && !options_.param_init)
      throw std::invalid_argument("fully_shard: parameter '" + p.name +
                                  "' is deferred (no storage) but FullyShardOptions::param_init is not set");
    size_t best = 0;
    for (size_t i = 0; i < unit_paths.size(); ++i) {
      bool all = std::all_of(p.module_paths.begin(), p.module_paths.end(),
                             [&](const std::string& mp) { return is_prefix_path(unit_paths[i], mp); });
      if (all && unit_paths[i].size() >= unit_paths[best].size()) best = i;
    }
    FlatParamEntry e;
    e.name = p.name;
    e.shape = p.param.sizes().vec();
    e.param = p.param;
    per_unit[best].push_back(std::move(e));
  }

  // 3. Buffers: cast floating ones; everybody takes rank 0's.
  const bool sync = options_.sync_module_states && rdzv_->world_size() > 1;
  for (auto& b : root_->buffers(/*recurse=*/true)) {
    if (at::isFloatingType(b.scalar_type()) && b.scalar_type() != options_.mixed_precision.buffer_dtype)
      b.set_data(b.to(options_.mixed_precision.buffer_dtype));
    if (sync) rdzv_->world()->broadcast(b, 0, {options_.timeout, "sync_module_states buffer"})->wait();
  }

  // 4. Flatten, (broadcast,) shard, bind.
  const bool reshard_strategy = options_.strategy == ShardingStrategy::kFullShard ||
                                options_.strategy == ShardingStrategy::kHybridShard;
  UnitComms comms{shard_ag_, shard_rs_, replicate_, options_.timeout};
  UnitPlacement placement{options_.compute_device, options_.offload.offload_params};
  for (size_t i = 0; i < unit_paths.size(); ++i) {
    FlatParamLayout layout(std::move(per_unit[i]), shard_ag_->size());
    total_param_numel_ += layout.numel();
    // Unit by unit: materialize this unit only (deferred parameters get
    // their values from param_init), shard it, free the full values.
    at::Tensor full = options_.param_init ? layout.materialize(options_.param_init) : layout.flatten_values();
    if (sync)
      rdzv_->world()->broadcast(full, 0, {options_.timeout, "sync_module_states " + unit_paths[i]})->wait();
    const torch::nn::Module* m = modules[unit_paths[i]].get();
    auto unit = std::make_unique<Unit>(static_cast<int>(i), unit_paths[i], m, std::move(layout), comms,
                                       options_.mixed_precision, reshard_strategy && i != 0, &memory_, placement);
    if (options_.activation_checkpointing && i != 0 &&
        options_.activation_checkpointing(unit_paths[i], *modules[unit_paths[i]])) {
      for (size_t j = 0; j < unit_paths.size(); ++j)
        if (j != i && j != 0 && is_prefix_path(unit_paths[i], unit_paths[j]))
          throw std::invalid_argument("fully_shard: unit '" + unit_paths[i] +
                                      "' checkpoints activations but contains the unit '" + unit_paths[j] +
                                      "'; nested units cannot be recomputed");
      unit->checkpoint_activations = true;
    }
    unit->init(full);
    full = at::Tensor();
    if (options_.param_init) release_free_heap();  // unit by unit: keep the peak at one unit
    largest_unit_bytes_ = std::max(largest_unit_bytes_, unit->param_bytes() + unit->grad_bytes());
    for (auto& e : unit->layout().entries()) {
      auto acc = torch::autograd::impl::grad_accumulator(e.param);
      acc->add_post_hook(std::make_unique<AccumulateGradHook>(this, unit.get()));
      unit->grad_accumulators.push_back(acc);
    }
    register_unit(m, this, unit.get());
    units_.push_back(std::move(unit));
  }
}

Runtime::~Runtime() {
  unregister_runtime(this);
  for (auto& u : units_) {
    for (auto& acc : u->grad_accumulators) {
      auto& hooks = acc->post_hooks();
      hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                                 [&](const std::unique_ptr<torch::autograd::FunctionPostHook>& h) {
                                   auto* g = dynamic_cast<AccumulateGradHook*>(h.get());
                                   return g && g->rt == this;
                                 }),
                  hooks.end());
    }
  }
}

bool Runtime::fits_budget(int64_t bytes) const {
  return memory_.current + bytes <= (options_.limit_all_gathers + 1) * largest_unit_bytes_;
}

Unit* Runtime::next_in(const std::vector<Unit*>& order, Unit* after, bool backward) const {
  auto it = std::find(order.begin(), order.end(), after);
  if (it == order.end()) return nullptr;
  for (++it; it != order.end(); ++it) {
    Unit* n = *it;
    if (backward && (n->training_state == TrainingState::kBackwardPre ||
                     n->training_state == TrainingState::kBackwardPost))
      continue;
    return n;
  }
  return nullptr;
}

void Runtime::make_room(int64_t bytes) {
  // The rate limiter: finish the oldest reductions (freeing their gradient
  // buffers) until `bytes` more fit the budget, or nothing is left to finish.
  advance_reductions(false);
  while (!fits_budget(bytes) && !pending_reductions_.empty()) {
    pending_reductions_.front()->advance_reduction(true);
    pending_reductions_.pop_front();
  }
}

void Runtime::prefetch(Unit* n) {
  if (!n || n->shard_state() != ShardState::kSharded) return;
  advance_reductions(false);
  if (fits_budget(n->param_bytes())) n->unshard_async();
}

void Runtime::trace(const char* event, const Unit* u) const {
  if (!trace_enabled()) return;
  std::fprintf(stderr, "[shard rank %d] %-14s %-12s unsharded=%lld peak=%lld\n", rdzv_->rank(), event,
               u ? u->describe().c_str() : "-", static_cast<long long>(memory_.current),
               static_cast<long long>(memory_.peak));
}

void Runtime::pre_forward(Unit* u) {
  if (u == units_[0].get()) {
    if (backward_started_) finish_all();
    forward_order_.clear();
  }
  u->training_state = TrainingState::kForward;
  forward_order_.push_back(u);
  if (u->shard_state() == ShardState::kSharded) make_room(u->param_bytes());
  u->wait_unshard();
  if (options_.forward_prefetch) prefetch(next_in(last_forward_order_, u, false));
  trace("pre_forward", u);
}

at::Tensor Runtime::post_forward(Unit* u, at::Tensor out) {
  const bool grad = at::GradMode::is_enabled() && out.defined() && out.requires_grad();
  if (u->reshard_after_forward() || !at::GradMode::is_enabled()) u->reshard();
  if (grad) out.register_hook([this, u](const at::Tensor&) { pre_backward(u); });
  trace("post_forward", u);
  return out;
}

void Runtime::pre_backward(Unit* u) {
  if (!backward_started_) {
    backward_started_ = true;
    backward_order_.assign(forward_order_.rbegin(), forward_order_.rend());
    torch::autograd::Engine::get_default_engine().queue_callback([this] { final_callback(); });
  }
  if (u->training_state == TrainingState::kBackwardPre || u->training_state == TrainingState::kBackwardPost) return;
  make_room((u->shard_state() == ShardState::kSharded ? u->param_bytes() : 0) +
            (u->grads_live() ? 0 : u->grad_bytes()));
  u->wait_unshard();
  u->prepare_grads();
  u->training_state = TrainingState::kBackwardPre;
  u->grads_accumulated = 0;
  if (options_.backward_prefetch == BackwardPrefetch::kBackwardPre) prefetch(next_in(backward_order_, u, true));
  trace("pre_backward", u);
}

void Runtime::grad_accumulated(Unit* u) {
  if (u->training_state != TrainingState::kBackwardPre)
    throw std::logic_error("fully_shard: " + u->describe() +
                           " received a gradient outside its backward (state " + to_string(u->training_state) +
                           "); was the parameter used outside the unit's forward_unit()?");
  if (++u->grads_accumulated == u->expected_grads()) post_backward(u);
}

void Runtime::post_backward(Unit* u) {
  u->training_state = TrainingState::kBackwardPost;
  if (!no_sync_) {
    u->start_reduction();
    pending_reductions_.push_back(u);
  }
  u->reshard();
  advance_reductions(false);
  trace("post_backward", u);
}

void Runtime::advance_reductions(bool block_all) {
  while (!pending_reductions_.empty()) {
    if (!pending_reductions_.front()->advance_reduction(block_all)) break;
    pending_reductions_.pop_front();
  }
}

void Runtime::final_callback() {
  // Units whose parameters did not all receive gradients still reduce (on
  // every rank alike).
  for (Unit* u : backward_order_)
    if (u->training_state == TrainingState::kBackwardPre) post_backward(u);
  finish_all();
  for (auto& u : units_) {
    u->training_state = TrainingState::kIdle;
    u->grads_accumulated = 0;
  }
  last_forward_order_ = forward_order_;
  backward_started_ = false;
  trace("end_backward", nullptr);
}

void Runtime::for_each_full_unit(const std::function<void(Unit&, const std::vector<at::Tensor>&)>& fn) {
  finish_all();
  for (auto& u : units_) {
    const bool was_sharded = u->shard_state() != ShardState::kUnsharded;
    u->wait_unshard();
    auto values = u->copy_full_params();
    if (was_sharded) u->reshard();
    fn(*u, values);
  }
}

void Runtime::finish_all() {
  advance_reductions(true);
  for (auto& u : units_) {
    // A prefetch nobody used, or a unit whose backward never ran.
    if (u->shard_state() == ShardState::kUnsharding) u->wait_unshard();
    u->reshard();
  }
}

}  // namespace shard
