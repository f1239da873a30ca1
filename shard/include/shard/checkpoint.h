// Sharded checkpoints (llm.c style): every rank writes its own shard of the
// model's fp32 master parameters and AdamW state to its own file (temp name,
// fsync, rename); all ranks meet at a barrier; rank 0 writes a manifest
// (format version, world size, strategy, every unit's flat layout, each
// file's size and checksum) and, last, a DONE marker. Readers trust only
// checkpoints with a DONE marker.
//
// Loading on a different world size (or shard-group size) reshards: each
// rank reads only the byte ranges of old shards that overlap its new shard.
//
// Layout: <root>/step_<NNNNNNNN>/{rank_<r>.bin, manifest.txt, DONE}
#pragma once

#include <cstdint>
#include <string>

namespace torch::optim {
class Optimizer;
}

namespace shard {

class FullyShardedModel;

struct CheckpointOptions {
  int keep_last = 0;  // > 0: delete older DONE checkpoints beyond the newest K
};

// Collective. `opt` must be a torch::optim::AdamW over model.parameters()
// (or nullptr: parameters only). `extra` is opaque caller state (data
// position, RNG, ...), stored in the manifest. Returns the directory.
std::string save_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt, const std::string& root,
                            int64_t step, const std::string& extra = "", const CheckpointOptions& options = {});

// The newest checkpoint directory under root with a DONE marker; "" if none.
std::string latest_checkpoint(const std::string& root);

struct LoadedCheckpoint {
  int64_t step = 0;
  std::string extra;
  int saved_world_size = 0;
};

// Collective. Loads (and reshards) `dir` into the model and optimizer.
// Throws std::runtime_error naming the file on a missing DONE marker, a
// missing or truncated file, a checksum mismatch, or a manifest written for
// another model; the model is untouched then.
LoadedCheckpoint load_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt, const std::string& dir);

// Consolidated export (collective): rank 0 writes the full, unflattened
// parameters by qualified name. Units are gathered one at a time, so no rank
// holds more than one unit's unsharded buffer; rank 0 accumulates the fp32
// copies it writes. Written to <path>.tmp, fsync'ed, renamed.
enum class ExportFormat {
  // A LibTorch archive (torch::serialize::InputArchive reads it; each
  // tensor under its name).
  kLibTorchArchive,
  // torch.save's zip format holding a dict {name: tensor} (written with
  // torch::jit::pickle_save): Python's torch.load(path) returns the state dict,
  // torch::jit::pickle_load reads it in C++.
  kTorchSave,
};
void export_full_state_dict(FullyShardedModel& model, const std::string& path,
                            ExportFormat format = ExportFormat::kLibTorchArchive);

// Import (collective): every rank reads either export format (or an archive
// LibTorch's torch::save(module) wrote, or a torch.save(state_dict) file) and keeps its shard of every unit. Throws
// std::runtime_error naming the file and the parameter when one is missing
// or has another shape; the model is untouched then.
void import_full_state_dict(FullyShardedModel& model, const std::string& path);

}  // namespace shard
