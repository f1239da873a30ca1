// fully_shard: the public entry of shard/. Wraps a module tree into FSDP
// units (one flat, padded, sharded fp32 parameter per unit), and runs them:
// all-gather before a unit's forward (and again before its backward), free
// after; reduce-scatter its gradient as soon as it is complete.
//
// LibTorch C++ modules have no forward hooks, so a module that may be a unit
// runs its forward body through shard::forward_unit(*this, fn). When the
// module is not (the root of) a unit of a live FullyShardedModel, that is a
// plain call of fn.
#pragma once

#include "shard/communicator.h"
#include "shard/policy.h"

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace shard {

class Rendezvous;
class Runtime;

// Runs `fn` as the forward of `module` (see the file comment). Throws when
// `module` is a unit with activation checkpointing (use the form below).
at::Tensor forward_unit(const torch::nn::Module& module,
                        const std::function<at::Tensor()>& fn);

// Runs fn(input) as the forward of `module`. When `module` is a unit with
// activation checkpointing (FullyShardOptions::activation_checkpointing),
// forward keeps only `input`, and backward unshards the unit again and
// recomputes fn(input). fn must depend on nothing but `input`, the module's
// parameters and buffers, and be deterministic.
at::Tensor forward_unit(const torch::nn::Module& module, const at::Tensor& input,
                        const std::function<at::Tensor(const at::Tensor&)>& fn);

// Deferred initialization, the meta-device stand-in: frees the storage of
// every parameter of `module` (recursively); shapes, dtypes and autograd
// identity stay. Build a large model submodule by submodule, deferring each
// right after it is built, then shard it with FullyShardOptions::param_init:
// each unit is materialized, sharded and its full values freed before the
// next, so no rank ever holds more than its shards plus one unit.
void defer_parameters(torch::nn::Module& module);
bool is_deferred(const at::Tensor& param);

struct MemoryStats {
  int64_t sharded_param_bytes = 0;    // fp32 master shards on this rank
  int64_t sharded_grad_bytes = 0;     // sharded gradients on this rank
  int64_t unsharded_current_bytes = 0;  // unsharded param + grad buffers now
  int64_t unsharded_peak_bytes = 0;     // high-water mark since reset
  int64_t largest_unit_unsharded_bytes = 0;  // params + grads of the largest unit
  int64_t total_param_numel = 0;      // unpadded numel of the whole model
  // Where the sharded parameters, gradients and optimizer state live.
  bool offloaded = false;
};

struct UnitInfo {
  std::string name;                   // qualified module name ("" = root)
  int64_t numel = 0;                  // unpadded
  int64_t padded_numel = 0;           // multiple of the shard-group size
  int64_t shard_numel = 0;            // this rank's shard
  std::vector<std::string> param_names;  // qualified, in flat order
  bool activation_checkpointing = false;
};

class FullyShardedModel {
 public:
  // Collective: every rank calls it with an identically built module tree.
  // Replaces the tree's parameters by views into per-unit flat buffers.
  FullyShardedModel(std::shared_ptr<torch::nn::Module> root,
                    std::shared_ptr<Rendezvous> rendezvous,
                    FullyShardOptions options);
  ~FullyShardedModel();
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;

  torch::nn::Module& module();
  const FullyShardOptions& options() const;

  // The fp32 sharded flat parameters (leaves, one per unit) for any
  // torch::optim optimizer. Their .grad() holds the reduced, sharded gradient
  // after backward.
  std::vector<at::Tensor> parameters();

  // Gradient accumulation: inside the guard's lifetime backward keeps
  // unsharded gradients and reduces nothing; the first backward after it
  // reduces the sum.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Runtime* rt);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    Runtime* rt_;
  };
  NoSyncGuard no_sync();

  // Global-norm clipping across all shards (and replicas); returns the total
  // norm before clipping.
  double clip_grad_norm(double max_norm, double norm_type = 2.0);

  // The full, unflattened parameters by qualified name (fp32), gathered unit
  // by unit on every rank. Collective.
  std::map<std::string, at::Tensor> full_parameters();

  // Per-element masks over this rank's shards, for optimizers that treat
  // parameters differently (weight decay on matrices only, say): one bool
  // tensor per flat parameter, in parameters() order, with that shard's
  // numel and device. An element is true when it belongs to an original
  // parameter for which select(qualified name, shape) is true; padding is
  // false. Computed from the layout alone (no communication, nothing
  // stored), so it is right for every strategy and world size, also after a
  // checkpoint is loaded at another world size.
  std::vector<at::Tensor> shard_masks(
      const std::function<bool(const std::string& name, at::IntArrayRef shape)>& select) const;

  MemoryStats memory() const;
  void reset_peak_memory();
  std::vector<UnitInfo> units() const;
  // Shard group / replicate group communicators (replicate may be size 1).
  CommunicatorPtr shard_group() const;
  CommunicatorPtr replicate_group() const;

 private:
  friend struct CheckpointAccess;
  std::unique_ptr<Runtime> rt_;
};

}  // namespace shard
