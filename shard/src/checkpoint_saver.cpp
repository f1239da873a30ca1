#include "checkpoint_saver.h"

#include "crc32c.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>

namespace shard {

std::function<void(const std::string&)>& checkpoint_fault_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

void checkpoint_fault_point(const char* point) {
  if (checkpoint_fault_hook()) checkpoint_fault_hook()(point);
}

namespace {

constexpr size_t kAlign = 4096;
// One piece: checksummed by the saver while the store writes the previous.
constexpr size_t kPieceBytes = 8 << 20;
static_assert(kPieceBytes % kCheckpointChunkBytes == 0);

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Every rank reached the agreement and one or more of them failed (a write
// error such as ENOSPC; not a lost peer): the step is known to be unfinished.
struct AgreedFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// After an agreed failure (rank 0): the step's partial files are removed, so
// that a full disk gets its space back for the next save. Only without DONE:
// a step with one is never touched here. Best effort (the step is untrusted
// without DONE whatever is left of it).
void discard_failed(CheckpointStore& store, const std::string& dir) {
  try {
    if (!store.size(dir + "/DONE")) store.remove_dir(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint: removing the failed %s failed (left): %s\n", store.path(dir).c_str(), e.what());
  }
}

}  // namespace

CheckpointSaver::CheckpointSaver(CommunicatorPtr side) : side_(std::move(side)) {}

CheckpointSaver::~CheckpointSaver() {
  if (thread_.joinable()) thread_.join();
}

char* CheckpointSaver::staging(size_t n, bool pinned) {
  const auto want = static_cast<int64_t>(n + kAlign);
  if (!staging_.defined() || staging_.numel() < want || staging_.is_pinned() != pinned) {
    staging_ = at::Tensor();  // (the old image first: never two)
    staging_ = at::empty({want}, at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
  }
  auto p = reinterpret_cast<uintptr_t>(staging_.data_ptr());
  image_ = reinterpret_cast<char*>((p + kAlign - 1) / kAlign * kAlign);
  return image_;
}

void CheckpointSaver::start(SaveRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) throw std::logic_error("CheckpointSaver::start: a save is in flight");
    running_ = true;
  }
  if (thread_.joinable()) thread_.join();  // (the previous save's retention)
  thread_ = std::thread([this, r = std::move(request)] {
    std::string failure;
    try {
      run(r);
    } catch (const AgreedFailure& e) {
      failure = e.what();
      // (Before the caller hears of it. A local disk only: a failed S3 save
      // holds no disk here, and its uploads are aborted by the store.)
      if (side_->rank() == 0 && r.store->root().rfind("s3://", 0) != 0) discard_failed(*r.store, r.dir);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      failure_ = std::move(failure);
      running_ = false;
    }
    done_.notify_all();
    if (side_->rank() == 0) retain(r);
  });
}

void CheckpointSaver::wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return !running_; });
  }
  poll();
}

void CheckpointSaver::finish() {
  if (thread_.joinable()) thread_.join();
  poll();
}

void CheckpointSaver::poll() {
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) return;
    failure.swap(failure_);
  }
  if (!failure.empty()) throw std::runtime_error(failure);
}

void CheckpointSaver::fill(const SaveRequest& r, size_t lo, size_t hi) {
  for (const auto& c : r.copies) {
    const size_t a = std::max(lo, c.offset), b = std::min(hi, c.offset + c.bytes);
    if (a >= b) continue;
    if (c.src)
      std::memcpy(image_ + a, static_cast<const char*>(c.src) + (a - c.offset), b - a);
    else
      std::memset(image_ + a, 0, b - a);
  }
}

void CheckpointSaver::retain(const SaveRequest& r) {
  CheckpointStore& store = *r.store;
  try {
    // Only after a save that is done: the newest K DONE checkpoints stay. A
    // step without DONE that sorts before the newest DONE one is a save that
    // crashed (never trusted): removed. A newer one may be in progress: kept.
    if (!store.size(r.dir + "/DONE")) return;
    // Incomplete uploads of dead writers (S3 multipart) at or before this
    // step, whatever keep_last: no live save has any there (this gang's
    // writers of r.dir committed, and no rank starts the next save before
    // rank 0 has joined this thread).
    if (const int n = store.abort_stale_uploads(r.dir); n > 0)
      std::fprintf(stderr, "checkpoint: aborted %d incomplete upload(s) of dead saves under %s\n", n,
                   store.root().c_str());
    if (r.keep_last <= 0) return;
    std::vector<std::string> done, partial;
    for (const auto& d : store.list_dirs("step_")) (store.size(d + "/DONE") ? done : partial).push_back(d);
    std::sort(done.begin(), done.end());
    if (!done.empty())
      for (const auto& p : partial)
        if (p < done.back()) store.remove_dir(p);
    for (size_t i = 0; i + r.keep_last < done.size(); ++i) store.remove_dir(done[i]);
  } catch (const std::exception& e) {
    // The checkpoint is done; old ones are left for the next save.
    std::fprintf(stderr, "checkpoint: retention under %s failed (kept): %s\n", store.root().c_str(), e.what());
  }
}

void CheckpointSaver::run(const SaveRequest& r) {
  const int rank = side_->rank(), W = side_->size();
  CheckpointStore& store = *r.store;
  const std::string step_path = store.path(r.dir);
  auto opts = [&](const char* what) { return CollectiveOptions{r.timeout, what}; };
  // Every rank's verdict: throws on every rank when any failed (naming
  // them; a failing rank also says why).
  auto agree = [&](const std::string& error, const char* what) {
    at::Tensor bad = at::zeros({W}, at::kDouble);  // (Gloo sums floating point only)
    bad[rank] = error.empty() ? 0.0 : 1.0;
    side_->all_reduce(bad, ReduceOp::kSum, opts(what))->wait();
    std::vector<int> failed;
    for (int k = 0; k < W; ++k)
      if (bad[k].item<double>() != 0) failed.push_back(k);
    if (failed.empty()) return;
    throw AgreedFailure("checkpoint " + step_path + " failed on rank(s) " + ranks_text(failed) +
                        (error.empty() ? " (see their errors)" : ": " + error));
  };

  // 1. A rewritten step is untrusted until it is done again, and starts
  //    empty: rank 0 removes DONE first, then whatever else is there (a dead
  //    save's objects at this step: rank files of another world size, a
  //    manifest); nobody writes before all agree.
  std::string error;
  try {
    if (rank == 0) {
      store.remove(r.dir + "/DONE");
      store.remove_dir(r.dir);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "checkpoint start");

  // 2. This rank's file, and its chunk index.
  const char* image = image_;
  std::vector<int64_t> mine{0, 0, 0};                     // size, file CRC, index CRC
  try {
    store.make_dir(r.dir);
    const std::string name = r.dir + "/rank_" + std::to_string(rank) + ".bin";
    auto out = store.create(name);
    std::vector<uint32_t> chunks;
    chunks.reserve(r.bytes / kCheckpointChunkBytes + 1);
    uint32_t file_crc = 0;
    for (size_t at = 0; at < r.bytes; at += kPieceBytes) {
      const size_t piece = std::min(kPieceBytes, r.bytes - at);
      fill(r, at, at + piece);  // (a synchronous save copies here, overlapping the writes)
      for (size_t c = 0; c < piece; c += kCheckpointChunkBytes) {
        const size_t n = std::min<size_t>(kCheckpointChunkBytes, piece - c);
        chunks.push_back(crc32c(0, image + at + c, n));
        file_crc = at + c == 0 ? chunks.back() : crc32c_concat(file_crc, chunks.back(), n);
      }
      out->append(image + at, piece);
      if (at == 0) {
        out->flush();
        checkpoint_fault_point("shard_partially_written");
      }
    }
    mine[0] = out->commit();
    mine[1] = file_crc;
    const std::string index = chunk_index_bytes(chunks, kCheckpointChunkBytes);
    store.put(r.dir + "/rank_" + std::to_string(rank) + ".crc", index);
    mine[2] = crc32c(0, index.data(), index.size());
    checkpoint_fault_point("shard_renamed");
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree(error, "checkpoint shards written");

  // 3. Everybody's sizes and checksums, for the manifest.
  at::Tensor all = at::empty({3 * W}, at::kLong);
  side_->all_gather_into(all, at::tensor(mine, at::kLong), opts("checkpoint checksums"))->wait();

  // 4. Rank 0: manifest, DONE, retention.
  if (rank == 0) {
    try {
      Manifest m = r.manifest;
      m.files.assign(W, {});
      for (int k = 0; k < W; ++k) {
        m.files[k].size = all[3 * k].item<int64_t>();
        m.files[k].crc = static_cast<uint32_t>(all[3 * k + 1].item<int64_t>());
        m.files[k].index_crc = static_cast<uint32_t>(all[3 * k + 2].item<int64_t>());
      }
      const std::string text = manifest_text(m);
      store.put(r.dir + "/manifest.txt", text);
      checkpoint_fault_point("manifest_written");
      store.put(r.dir + "/DONE", "manifest " + hex64(crc32c(0, text.data(), text.size())) + "\n");
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  agree(error, "checkpoint done");
}

}  // namespace shard
