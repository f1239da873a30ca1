// Parity harness: the same GPT, data and optimizer trained by one process
// (the reference) and by FSDP ranks.
#pragma once

#include "shard/policy.h"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace gstest {

struct TrainSpec {
  int steps = 4;
  int global_batch = 8;   // sequences per step, divisible by the world size
  int seq = 16;
  int micro_batches = 1;  // gradient accumulation
  double clip = 0;        // 0 = no clipping
  double lr = 1e-2;
  bool bf16 = false;
  int n_layer = 3;
  // Checkpointing (fsdp_train only): save after `save_at` steps into
  // ckpt_root; or resume from resume_dir ("latest" = newest DONE one).
  std::string ckpt_root;
  int save_at = -1;
  int save_every = 0;       // > 0: also save before every step that is a multiple of it
  bool async_save = false;
  int keep_last = 0;        // CheckpointOptions::keep_last  // CheckpointOptions::async (checked each step; waited for at the end)
  std::string resume_dir;
  int model_seed = 1234;
  // Consolidated state dict: import before training, export after it.
  std::string import_path, export_path;
  bool export_torch_save = false;  // torch.save format instead of a LibTorch archive
  // Add AdamW's state (gathered, by parameter) to the result's params.
  bool dump_optimizer = false;
};

struct TrainResult {
  std::vector<double> losses;                 // global mean loss per step
  std::vector<double> grad_norms;             // when clipping
  std::map<std::string, at::Tensor> params;   // final, fp32, by name
  int first_step = 0;                         // > 0 when resumed
};

// Single process, plain LibTorch (no shard/ runtime).
TrainResult reference_train(const TrainSpec& spec);

// One FSDP rank (RANK etc. from the environment). Rank 0 returns the result;
// memory figures go to `mem` (per rank).
struct RankMemory {
  int64_t peak_unsharded = 0, largest_unit = 0, sharded_param_bytes = 0, total_numel = 0;
  int64_t padded_total = 0;
};
TrainResult fsdp_train(const TrainSpec& spec, const shard::FullyShardOptions& options, RankMemory* mem);

// Serialize a result for the parent test process.
void save_result(const TrainResult& r, const std::string& path);
TrainResult load_result(const std::string& path);

}  // namespace gstest
