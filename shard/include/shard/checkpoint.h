// Sharded checkpoints (llm.c style): every rank writes its own shard of the
// model's fp32 master parameters and AdamW state to its own file (temp name,
// fsync, rename); all ranks meet at a barrier; rank 0 writes a manifest
// (format version, world size, strategy, every unit's flat layout, each
// file's size and checksum) and, last, a DONE marker. Readers trust only
// checkpoints with a DONE marker.
//
// Loading on a different world size (or shard-group size) reshards: each
// rank reads only the old segments (one unit's master, exp_avg or exp_avg_sq
// shard of one old rank: shard_numel * 4 bytes) that overlap its new shard,
// each whole, to verify its CRC-32C, and keeps the overlapping part.
//
// Layout: <root>/step_<NNNNNNNN>/{rank_<r>.bin, manifest.txt, DONE}
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace torch::optim {
class Optimizer;
}

namespace shard {

class FullyShardedModel;

struct CheckpointOptions {
  // > 0: after a save, rank 0 deletes the DONE checkpoints beyond the newest
  // K, and every step directory without DONE older than the newest DONE one
  // (a crashed save); newer ones without DONE (maybe in progress) stay.
  int keep_last = 0;
};

// Collective. `opt` must be a torch::optim::AdamW over model.parameters()
// (or nullptr: parameters only). `extra` is opaque caller state (data
// position, RNG, ...), stored in the manifest. Returns the directory.
std::string save_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt, const std::string& root,
                            int64_t step, const std::string& extra = "", const CheckpointOptions& options = {});

// Fault injection, for tests only: `hook(point)` is called in this process at
// named points of save_checkpoint (null, the default: nothing):
//   "shard_partially_written"  every rank, the first unit's bytes written to
//                              its rank_<r>.bin.tmp, before fsync and rename;
//   "shard_renamed"            every rank, rank_<r>.bin in place, before the
//                              checksum exchange;
//   "manifest_written"         rank 0, manifest.txt in place, before DONE.
void set_checkpoint_fault_hook(std::function<void(const std::string& point)> hook);

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
