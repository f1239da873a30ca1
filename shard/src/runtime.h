// Runtime: drives the units of one FullyShardedModel through an iteration.
//
//   forward:  pre_forward(u)  unshard u (wait its prefetch), prefetch next
//             post_forward(u) reshard u (FULL_SHARD, HYBRID_SHARD; not the
//                             root), hook u's output for backward
//   backward: pre_backward(u) (output-gradient hook) unshard u, bind its
//                             gradient buffer, prefetch the next unit in
//                             reverse forward order
//             post_backward(u) (all of u's AccumulateGrad nodes ran)
//                             start reducing u's gradient, reshard u
//             final_callback  (end of backward) flush units whose gradients
//                             did not all arrive, wait every reduction
//
// A byte budget of (limit_all_gathers + 1) x the largest unit's parameter
// and gradient bytes bounds prefetching (the rate limiter).
#pragma once

#include "memory_tracker.h"
#include "unit.h"
#include "shard/fully_shard.h"
#include "shard/rendezvous.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace shard {

class CheckpointSaver;

class Runtime {
 public:
  Runtime(std::shared_ptr<torch::nn::Module> root, std::shared_ptr<Rendezvous> rdzv,
          FullyShardOptions options);
  ~Runtime();

  // Hooks.
  void pre_forward(Unit* u);
  at::Tensor post_forward(Unit* u, at::Tensor out);
  void pre_backward(Unit* u);
  void grad_accumulated(Unit* u);
  void final_callback();

  torch::nn::Module& module() { return *root_; }
  const FullyShardOptions& options() const { return options_; }
  std::vector<std::unique_ptr<Unit>>& units() { return units_; }
  const std::vector<std::unique_ptr<Unit>>& units() const { return units_; }
  MemoryTracker& memory() { return memory_; }
  const MemoryTracker& memory() const { return memory_; }
  int64_t largest_unit_bytes() const { return largest_unit_bytes_; }
  int64_t total_param_numel() const { return total_param_numel_; }
  CommunicatorPtr shard_group() const { return shard_rs_; }
  const std::shared_ptr<Rendezvous>& rendezvous() const { return rdzv_; }
  CommunicatorPtr replicate_group() const { return replicate_; }
  void set_no_sync(bool v) { no_sync_ = v; }
  // The checkpoint saver (checkpoint.cpp creates it at the first save).
  std::shared_ptr<CheckpointSaver>& checkpoint_saver() { return checkpoint_saver_; }
  // Finish everything still in flight (reductions, gathers). Safe twice.
  void finish_all();
  // Collective: gathers one unit at a time, hands its full fp32 parameters
  // (in layout order) to fn, and reshards it again before the next.
  void for_each_full_unit(const std::function<void(Unit&, const std::vector<at::Tensor>&)>& fn);

 private:
  void build_units();
  void trace(const char* event, const Unit* u) const;
  void post_backward(Unit* u);
  void prefetch(Unit* u);
  void make_room(int64_t bytes);
  bool fits_budget(int64_t bytes) const;
  void advance_reductions(bool block_all);
  Unit* next_in(const std::vector<Unit*>& order, Unit* after, bool backward) const;

  std::shared_ptr<torch::nn::Module> root_;
  std::shared_ptr<Rendezvous> rdzv_;
  FullyShardOptions options_;
  CommunicatorPtr shard_ag_, shard_rs_, replicate_;
  std::vector<std::unique_ptr<Unit>> units_;  // units_[0] is the root
  MemoryTracker memory_;
  int64_t largest_unit_bytes_ = 0;
  int64_t total_param_numel_ = 0;

  std::vector<Unit*> forward_order_;       // this iteration
  std::vector<Unit*> last_forward_order_;  // previous iteration (prefetch)
  std::vector<Unit*> backward_order_;      // reverse forward order
  std::deque<Unit*> pending_reductions_;   // FIFO: same order on every rank
  bool backward_started_ = false;
  bool no_sync_ = false;
  // Last: destroyed first, so its thread ends before anything it may use.
  std::shared_ptr<CheckpointSaver> checkpoint_saver_;
};

}  // namespace shard
