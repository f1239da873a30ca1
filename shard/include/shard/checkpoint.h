// Sharded checkpoints (llm.c style): every rank writes its own shard of the
// model's fp32 master parameters and AdamW state to its own file
// (rank_<r>.bin, made durable and visible atomically) with a CRC-32C per
// 64 KiB chunk (rank_<r>.crc); rank 0 then writes a manifest (format
// version, world size, strategy, every unit's flat layout, each file's size
// and checksums) and, last, a DONE marker. Readers trust only checkpoints
// with a DONE marker.
//
// Saves can be asynchronous: training waits only while each rank copies its
// shards to host staging buffers; a thread writes, checksums, and agrees
// with the other ranks on a communicator of its own (docs/shard.md).
//
// Loading on a different world size (or shard-group size) reshards: each
// rank reads only the chunks that overlap its new shard, and verifies them.
//
// Roots: a local directory, or "s3://bucket/prefix" (S3-compatible object
// storage; endpoint, region and credentials from the environment:
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY [, AWS_SESSION_TOKEN], or GREENSHARD_S3_SECRET_DIR).
//
// Layout: <root>/step_<NNNNNNNN>/{rank_<r>.bin, rank_<r>.crc, manifest.txt, DONE}
#pragma once

#include <chrono>
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
  // true: save_checkpoint returns once this rank's shards and optimizer
  // state are in host staging buffers (reused across saves; page-locked,
  // copied on a side stream, for a CUDA model); a background thread writes
  // them. false: it returns when the checkpoint is done (DONE written);
  // retention then runs in the background (wait_for_checkpoint waits for it).
  bool async = false;
  // How long the background save's agreements wait for the slowest rank
  // (its write included).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
};

// Collective. `opt` must be a torch::optim::AdamW over model.parameters()
// (or nullptr: parameters only). `extra` is opaque caller state (data
// position, RNG, ...), stored in the manifest. Returns the directory
// ("<root>/step_<NNNNNNNN>"). At most one save is in flight: a save first
// waits for the previous one, and throws its failure.
std::string save_checkpoint(FullyShardedModel& model, torch::optim::Optimizer* opt, const std::string& root,
                            int64_t step, const std::string& extra = "", const CheckpointOptions& options = {});

// Collective in effect (every rank's save agrees). Blocks until the save in
// flight, if any, is done, its retention (keep_last) included; throws its failure (on every rank: a failure on
// one rank fails the save everywhere, and no DONE is written). A failure is
// thrown once; calling it again then returns. Call before exit.
void wait_for_checkpoint(FullyShardedModel& model);

// Never blocks: throws the failure of a save that has ended (once), and
// returns otherwise. Call once per training step.
void check_checkpoint(FullyShardedModel& model);

// Fault injection, for tests only: `hook(point)` is called in this process at
// named points of a save, on its background thread (null, the default:
// nothing; a hook that throws fails the save like a write error):
//   "shard_partially_written"  every rank, the first piece (8 MiB or the
//                              whole file) written to its rank_<r>.bin.tmp
//                              (S3: its first part uploaded), before commit;
//   "shard_renamed"            every rank, rank_<r>.bin and rank_<r>.crc in
//                              place, before the checksum exchange;
//   "manifest_written"         rank 0, manifest.txt in place, before DONE.
void set_checkpoint_fault_hook(std::function<void(const std::string& point)> hook);

// The newest checkpoint directory under root with a DONE marker; "" if none.
std::string latest_checkpoint(const std::string& root);

// Not collective, needs no model: the `extra` record (save_checkpoint's
// argument) of the checkpoint `dir` (a latest_checkpoint() result: a step
// directory's path or S3 URL), after the same checks load_checkpoint makes
// of its DONE marker and manifest. Throws std::runtime_error naming the file.
std::string read_checkpoint_extra(const std::string& dir);

struct LoadedCheckpoint {
  int64_t step = 0;
  std::string extra;
  int saved_world_size = 0;
  // This rank's reads: bytes read from shard files and chunk indexes, and
  // the bytes its new shards need from them.
  int64_t bytes_read = 0, bytes_needed = 0;
};

// Collective. Loads (and reshards) `dir` (a latest_checkpoint() result: a
// path or an S3 URL) into the model and optimizer.
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
  // torch.save's zip format holding a plain dict {name: tensor} (what
  // torch::jit::pickle_save writes, without its TorchScript type tag):
  // Python's torch.load(path), also with weights_only=True, returns the
  // state dict; torch::jit::pickle_load reads it in C++.
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
