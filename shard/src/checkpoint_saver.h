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
//   4. rank 0 writes manifest.txt, then DONE, then applies retention, and
//      tells every rank whether that worked.
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

namespace shard {

struct SaveRequest {
  std::shared_ptr<CheckpointStore> store;
  std::string dir;       // "step_00000010", under the store's root
  Manifest manifest;     // all but `files` (rank 0 completes and writes it)
  int keep_last = 0;     // see CheckpointOptions
  size_t bytes = 0;      // staging()[0, bytes) is this rank's file
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
  // Blocks until idle; then throws the failure of the save that ended, once.
  void wait();
  // Never blocks: throws the failure of a save that has ended, once.
  void poll();

 private:
  void run(const SaveRequest& r);  // (the thread) throws the save's failure

  CommunicatorPtr side_;
  at::Tensor staging_;    // kByte, CPU (pinned or not)
  char* image_ = nullptr; // its first 4 KiB-aligned byte
  std::thread thread_;
  std::mutex mu_;
  bool running_ = false;
  std::string failure_;  // of the save that ended, until reported
};

// Fault injection for tests (checkpoint.h): the points the saver calls.
void checkpoint_fault_point(const char* point);

}  // namespace shard
