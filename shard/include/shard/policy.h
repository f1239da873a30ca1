// Policies: how a module tree is sharded, wrapped, and cast.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "shard/strategy_names.h"  // ShardingStrategy, to_string, parse_sharding_strategy

namespace torch::nn {
class Module;
}

namespace shard {

enum class BackwardPrefetch { kNone, kBackwardPre };

struct MixedPrecisionPolicy {
  at::ScalarType param_dtype = at::kFloat;   // unsharded params for compute
  at::ScalarType reduce_dtype = at::kFloat;  // gradient reduction
  at::ScalarType buffer_dtype = at::kFloat;  // module buffers
};

// Which submodules become their own FSDP unit. The root always becomes a
// unit holding what no other unit holds. A module matched inside a matched
// module becomes a nested unit.
struct WrapPolicy {
  // Wrap a submodule when predicate(qualified_name, module) is true.
  std::function<bool(const std::string&, const torch::nn::Module&)> predicate;
  // Or: wrap the smallest submodules whose not-yet-wrapped parameter count
  // reaches min_num_params (0 = off).
  int64_t min_num_params = 0;

  static WrapPolicy none() { return {}; }
  static WrapPolicy size_based(int64_t min_num_params) {
    WrapPolicy p;
    p.min_num_params = min_num_params;
    return p;
  }
  template <typename ModuleImpl>
  static WrapPolicy by_type() {
    WrapPolicy p;
    p.predicate = [](const std::string&, const torch::nn::Module& m) {
      return dynamic_cast<const ModuleImpl*>(&m) != nullptr;
    };
    return p;
  }
};

// CPU offload (FSDP's CPUOffload(offload_params=True)): the sharded fp32
// parameters, their gradients and the optimizer state live in host memory
// and the optimizer steps there; a unit's shard is copied to the compute
// device just for its all-gather, and its reduced gradient shard is copied
// back. On a CPU-only build host and compute device coincide: the copies
// are still made (so this path runs and is tested everywhere).
struct OffloadPolicy {
  bool offload_params = false;
};

// A unit's activation checkpointing: predicate(unit_name, module) true ->
// the unit keeps only its input in forward and recomputes its forward during
// backward (after unsharding again). Such a unit runs its forward through
// forward_unit(module, input, fn) and must not contain nested units.
using ActivationCheckpointPolicy = std::function<bool(const std::string&, const torch::nn::Module&)>;

// Deferred (unit-by-unit) initialization: fills one parameter, given its
// qualified name and a tensor of its shape to write into. See
// shard::defer_parameters.
using ParamInitFn = std::function<void(const std::string& name, at::Tensor& param)>;

struct FullyShardOptions {
  ShardingStrategy strategy = ShardingStrategy::kFullShard;
  WrapPolicy wrap;
  MixedPrecisionPolicy mixed_precision;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;
  bool forward_prefetch = false;
  // Rate limiter: at most this many units unsharded by prefetch ahead of the
  // one computing (>= 1).
  int limit_all_gathers = 2;
  // HYBRID_SHARD: ranks per shard group (must divide the world size;
  // 0 = LOCAL_WORLD_SIZE).
  int hybrid_shard_group_size = 0;
  // Copy rank 0's initial parameters and buffers to every rank.
  bool sync_module_states = true;
  // Where units compute. CPU unless built with GREENSHARD_CUDA.
  c10::Device compute_device = c10::Device(c10::kCPU);
  OffloadPolicy offload;
  // Null = no unit checkpoints its activations. Never applies to the root.
  ActivationCheckpointPolicy activation_checkpointing;
  // Set: parameters may be deferred (no storage); each unit's parameters are
  // materialized by param_init, sharded, and the full values freed before
  // the next unit (peak memory ~ total/N + one unit). Every rank must
  // produce the same values (or sync_module_states copies rank 0's).
  ParamInitFn param_init;
  // Deadline of every collective.
  std::chrono::milliseconds timeout{std::chrono::minutes(3)};
};

// Throws std::invalid_argument naming the field.
void validate(const FullyShardOptions& options, int world_size, int local_world_size);

}  // namespace shard
