// Unit: one FSDP unit. Owns one flat parameter: the fp32 master shard (what
// the optimizer updates), the unsharded buffer the module's parameters view
// (all-gathered before use, freed after), and the unsharded gradient buffer
// the parameters' .grad view (reduce-scattered when complete, then freed).
#pragma once

#include "flat_param.h"
#include "memory_tracker.h"
#include "shard/communicator.h"
#include "shard/policy.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}
namespace torch::autograd {
struct Node;
}

namespace shard {

enum class ShardState { kSharded, kUnsharding, kUnsharded };
enum class TrainingState { kIdle, kForward, kBackwardPre, kBackwardPost };
const char* to_string(ShardState s);
const char* to_string(TrainingState s);

// Where a unit's tensors live: the compute device (unsharded parameters and
// gradients) and, with offload, the host (master shard, sharded gradient).
struct UnitPlacement {
  c10::Device compute = c10::Device(c10::kCPU);
  bool offload = false;
};

struct UnitComms {
  CommunicatorPtr all_gather;     // shard group, parameter all-gathers
  CommunicatorPtr reduce_scatter; // shard group, gradient reduce-scatters
  CommunicatorPtr replicate;      // replicate group (nullptr when size 1)
  std::chrono::milliseconds timeout{0};
};

class Unit {
 public:
  Unit(int index, std::string name, const torch::nn::Module* module,
       FlatParamLayout layout, UnitComms comms, MixedPrecisionPolicy mp,
       bool reshard_after_forward, MemoryTracker* memory, UnitPlacement placement = {});
  ~Unit();

  // Takes the full fp32 flat values (identical on all ranks), keeps this
  // rank's shard as the master and binds the parameters to the unsharded
  // buffer; leaves the unit sharded.
  void init(const at::Tensor& full_flat);

  // --- parameters (each safe to call twice) ---
  void unshard_async();   // start the all-gather
  void wait_unshard();    // unshard_async if needed, then wait
  void reshard();         // free the unsharded buffer (waits an in-flight gather)

  // --- gradients ---
  // Allocates (zeroed) and binds the unsharded gradient buffer, unless it
  // still holds gradients kept by no_sync. Safe to call twice.
  void prepare_grads();
  // Starts reducing the unsharded gradient (reduce-scatter in the shard
  // group; all-reduce in the replicate group follows in advance_reduction).
  void start_reduction();
  // Moves the reduction on: returns true when it is finished and the result
  // was accumulated into the master's .grad. With block=false it never waits.
  bool advance_reduction(bool block);
  bool reduction_pending() const { return stage_ != Stage::kNone; }

  // --- accessors ---
  int index() const { return index_; }
  const std::string& name() const { return name_; }
  const torch::nn::Module* module() const { return module_; }
  const FlatParamLayout& layout() const { return layout_; }
  at::Tensor& master() { return master_; }
  ShardState shard_state() const { return shard_state_; }
  TrainingState training_state = TrainingState::kIdle;
  int grads_accumulated = 0;                 // this backward
  int expected_grads() const { return static_cast<int>(layout_.entries().size()); }
  bool reshard_after_forward() const { return reshard_after_forward_; }
  bool always_unsharded() const { return always_unsharded_; }
  bool grads_live() const { return grads_live_; }
  int64_t param_bytes() const;   // unsharded parameter buffer
  int64_t grad_bytes() const;    // unsharded gradient buffer
  int64_t unsharded_bytes_now() const;  // what this unit holds unsharded now
  std::string describe() const;  // "unit 'h.3'"
  std::vector<std::shared_ptr<torch::autograd::Node>> grad_accumulators;
  bool checkpoint_activations = false;

  // Copies the unsharded parameters out as fp32 (requires kUnsharded).
  std::vector<at::Tensor> copy_full_params() const;

 private:
  enum class Stage { kNone, kReduceScatter, kAllReduce };
  CollectiveOptions opts(const char* what) const;
  void free_grads();

  int index_;
  std::string name_;
  const torch::nn::Module* module_;
  FlatParamLayout layout_;
  UnitComms comms_;
  MixedPrecisionPolicy mp_;
  bool reshard_after_forward_;
  bool always_unsharded_ = false;  // one-rank shard group with fp32 params
  MemoryTracker* memory_;
  UnitPlacement placement_;

  at::Tensor master_;        // fp32 [shard_numel], leaf, requires grad
  at::Tensor unsharded_;     // param_dtype [padded_numel]
  ShardState shard_state_ = ShardState::kSharded;
  WorkPtr gather_work_;
  at::Tensor gather_src_;

  at::Tensor grad_flat_;     // param_dtype [padded_numel]
  bool grads_live_ = false;  // allocated and bound, holding gradients
  Stage stage_ = Stage::kNone;
  WorkPtr reduce_work_;
  at::Tensor reduce_in_, reduce_out_;
};

}  // namespace shard
