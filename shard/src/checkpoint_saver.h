// The background half of a checkpoint save (docs/shard.md, "Asynchronous
// saves"). The training thread copies this rank's shards into the saver's
// staging image and calls start(); a thread of the saver's own then
//   1. (rank 0) removes the step's DONE, if any: a rewritten step is not
//      trusted until it is done again; all ranks agree before writing;
//   2. writes the image to rank_<r>.bin, checksumming each 64 KiB chunk of
//      a piece while the store writes the previous piece, commits it
//      (durable, renamed), and writes its chunk index rank_<r>.crc;
//   3. exchanges (ok, size, CRCs) with every rank; a failure anywhere fails
//      the save on every rank and leaves no DONE;
//   4. rank 0 writes manifest.txt, then DONE, and tells every rank whether
//      that worked; the save is done then (wait() returns);
//   5. rank 0 applies retention (best effort), before the next save starts.
// All collectives run on `side`, a communicator of the saver's own, never
// inside the training step's. At most one save is in flight.
#pragma once

#include "checkpoint_manifest.h"
#include "checkpoint_store.h"
#include "shard/communicator.h"

#include <ATen/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shard {

// Bytes the saver copies into the staging image itself, piece by piece
// while it writes (a synchronous save of host tensors: the caller waits, so
// they stay unchanged). src null: zeros.
struct StagingCopy {
  const void* src = nullptr;
  size_t offset = 0, bytes = 0;  // in the image
};

struct SaveRequest {
  std::shared_ptr<CheckpointStore> store;
  std::string dir;       // "step_00000010", under the store's root
  Manifest manifest;     // all but `files` (rank 0 completes and writes it)
  int keep_last = 0;     // see CheckpointOptions
  size_t bytes = 0;      // staging()[0, bytes) is this rank's file
  std::vector<StagingCopy> copies;  // still to copy into it (sorted by offset)
  std::chrono::milliseconds timeout{0};  // of each agreement collective
};

class CheckpointSaver {
 public:
  explicit CheckpointSaver(CommunicatorPtr side);
  ~CheckpointSaver();  // waits for the save in flight (its failure is dropped: wait() first)
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // The staging image, at least n bytes, 4 KiB-aligned, reused across
  // saves; page-locked host memory when `pinned` (a CUDA model's). Only
  // while idle (after wait()).
  char* staging(size_t n, bool pinned);
  // Starts the background save. Precondition: idle.
  void start(SaveRequest request);
  // Blocks until the save is done (DONE written, or failed); then throws
  // its failure, once. Retention (keep_last) may still be running after it.
  void wait();
  // wait(), and retention done too.
  void finish();
  // Never blocks: throws the failure of a save that has ended, once.
  void poll();

 private:
  void run(const SaveRequest& r);  // (the thread) throws the save's failure
  void fill(const SaveRequest& r, size_t lo, size_t hi);  // r.copies within [lo, hi)
  void retain(const SaveRequest& r);                       // rank 0, after a done save

  CommunicatorPtr side_;
  at::Tensor staging_;    // kByte, CPU (pinned or not)
  char* image_ = nullptr; // its first 4 KiB-aligned byte
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable done_;
  bool running_ = false;
  std::string failure_;  // of the save that ended, until reported
};

// Fault injection for tests (checkpoint.h): the points the saver calls.
void checkpoint_fault_point(const char* point);

}  // namespace shard
