// Gloo (CPU, TCP) communicator: ring collectives over gloo unbound buffers.
//
// Threading: every communicator of size > 1 owns one worker thread that runs
// its collectives in issue order; calls only validate, enqueue and return a
// Work. Each collective gets a fresh gloo slot (ctx->nextSlot(), called on the
// worker, so it advances identically on every member) and a deadline; every
// blocking wait is bounded by that deadline. The first failure aborts the
// communicator: its connections are reset (so peers blocked on us fail fast
// instead of waiting for their own deadline) and every later call fails at
// once with the first error. The destructor aborts whatever is in flight.
// A monitor thread per communicator notices a broken connection (a peer that
// exited or crashed) and fails a wait that depends on that peer at once:
// gloo itself does not fail an operation already in flight on such a pair.
// Worker and gloo event-loop threads block SIGPIPE (a write to a dead peer
// gives EPIPE instead of killing the process).
//
// Algorithms (n members, T total bytes):
//  * all_gather_into: ring, (n-1)/n*T sent per rank, chunk-pipelined.
//  * reduce_scatter: ring, (n-1)/n*T sent per rank; partial sums go to a
//    scratch buffer (the input is never written); the reduction of chunk k
//    overlaps the transfer of chunk k+1. bf16/fp16 accumulate in fp32: the
//    first hop sends the input as it is, later hops send fp32 partial sums.
//  * all_reduce: reduce_scatter + all_gather (in place).
//  * broadcast: pipelined chain from the root.
//  * barrier: one byte to and from every peer.
#include "communicator_gloo.h"
#include "thread_name.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>

namespace shard::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;


// ---------------------------------------------------------------------------
// Work

// The error is kept as its message, and every wait() (or error()) makes an
// exception object of its own: no exception object is shared between the
// communicator's thread, which may drop the last reference to the Work, and
// the thread reading what() in its catch (their hand-off would be the
// reference count inside libstdc++, which ThreadSanitizer cannot see).
class GlooWork final : public Work {
 public:
  bool is_completed() override { return done_.load(std::memory_order_acquire); }

  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_.load(std::memory_order_relaxed); });
    if (failed_) throw CommError(error_);
  }

  std::exception_ptr error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_ ? std::make_exception_ptr(CommError(error_)) : nullptr;
  }

  // Done; `error` empty: it succeeded.
  void finish(std::string error = "") {
    {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = !error.empty();
      error_ = std::move(error);
      done_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  bool failed_ = false;
  std::string error_;
};

WorkPtr failed_work(const std::string& msg) {
  auto w = std::make_shared<GlooWork>();
  w->finish(msg);
  return w;
}

// ---------------------------------------------------------------------------
// Reusable aligned scratch memory (worker thread only).

class Scratch {
 public:
  ~Scratch() { std::free(ptr_); }
  void* get(size_t bytes) {
    if (bytes > cap_) {
      std::free(ptr_);
      ptr_ = nullptr;
      cap_ = 0;
      size_t rounded = (bytes + 63) / 64 * 64;
      ptr_ = std::aligned_alloc(64, rounded);
      if (!ptr_) throw std::bad_alloc();
      cap_ = rounded;
    }
    return ptr_;
  }

 private:
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

// ---------------------------------------------------------------------------
// Element kernels.

// Accumulation type: low-precision floats are reduced in fp32.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<c10::BFloat16> {
  using type = float;
};
template <>
struct Acc<c10::Half> {
  using type = float;
};
template <typename T>
using acc_t = typename Acc<T>::type;

inline float widen(float x) { return x; }
inline double widen(double x) { return x; }
inline float widen(c10::Half x) { return static_cast<float>(x); }
inline float widen(c10::BFloat16 x) {
  const uint32_t u = static_cast<uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename T>
T narrow(acc_t<T> a) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    uint32_t u;
    std::memcpy(&u, &a, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      return c10::BFloat16(0x7fc0, c10::BFloat16::from_bits());  // NaN
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    return c10::BFloat16(static_cast<uint16_t>(u >> 16), c10::BFloat16::from_bits());
  } else {
    return static_cast<T>(a);
  }
}

// acc[i] = r[i] + m[i] in the accumulation type. acc may alias r (same
// type), never m.
template <typename A, typename R, typename T>
void reduce_to_acc(A* acc, const R* r, const T* __restrict m, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = widen(r[i]) + widen(m[i]);
}

// out[i] = (r[i] + m[i]) / div, accumulated in acc_t<T>, stored as T. out
// may alias m (in-place all_reduce), never r.
template <typename T, typename R>
void reduce_final(T* out, const R* __restrict r, const T* m, size_t n, int div) {
  using A = acc_t<T>;
  if (div > 1) {
    const A d = static_cast<A>(div);
    for (size_t i = 0; i < n; ++i) out[i] = narrow<T>((widen(r[i]) + widen(m[i])) / d);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = narrow<T>(widen(r[i]) + widen(m[i]));
  }
}

// Blocks of a flat buffer: block i = [off[i], off[i] + len[i]).
struct Blocks {
  std::vector<size_t> off, len;
  size_t total = 0;
  static Blocks uniform(int n, size_t each) {
    Blocks b;
    for (int i = 0; i < n; ++i) {
      b.off.push_back(i * each);
      b.len.push_back(each);
    }
    b.total = n * each;
    return b;
  }
  // `count` elements split in n nearly equal blocks (the last ones shorter).
  static Blocks split(int n, size_t count) {
    Blocks b;
    size_t each = (count + n - 1) / n;
    for (int i = 0; i < n; ++i) {
      size_t lo = std::min(count, i * each);
      size_t hi = std::min(count, (i + 1) * each);
      b.off.push_back(lo);
      b.len.push_back(hi - lo);
    }
    b.total = count;
    return b;
  }
  Blocks scaled(size_t f) const {
    Blocks b = *this;
    for (auto& o : b.off) o *= f;
    for (auto& l : b.len) l *= f;
    b.total *= f;
    return b;
  }
};

// Chunks [off, off+len) of at most `chunk` units; empty for len == 0.
template <typename F>
void for_chunks(size_t off, size_t len, size_t chunk, F&& f) {
  for (size_t done = 0; done < len; done += chunk) {
    f(off + done, std::min(chunk, len - done));
  }
}

// ---------------------------------------------------------------------------

struct Run {
  Clock::time_point deadline;
  milliseconds timeout;
  uint64_t slot;
};

struct Task {
  const char* op = "";
  CollectiveOptions opts;
  std::function<void(Run&)> fn;
  std::shared_ptr<GlooWork> work;
};

class GlooCommunicator;

// An unbound buffer registered with its communicator so the destructor can
// abort a wait on it. Freed while a collective fails (unwinding), it first
// closes the group's connections: Gloo's loop thread may still be
// completing an operation posted on it (signalling the buffer), and closing
// a pair fails its pending operations and waits for the loop, so that
// nothing touches the buffer once it is gone.
class Buf {
 public:
  Buf(GlooCommunicator& comm, void* ptr, size_t bytes);
  ~Buf();
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  gloo::transport::UnboundBuffer* get() const { return buf_.get(); }

 private:
  GlooCommunicator& comm_;
  const int uncaught_at_start_ = std::uncaught_exceptions();
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(GlooGroupSpec spec, std::shared_ptr<gloo::Context> ctx)
      : spec_(std::move(spec)), ctx_(std::move(ctx)) {
    const int n = static_cast<int>(spec_.global_ranks.size());
    if (n < 1 || spec_.rank < 0 || spec_.rank >= n) {
      throw std::invalid_argument("make_gloo_communicator: rank " +
                                  std::to_string(spec_.rank) +
                                  " outside group " +
                                  format_ranks(spec_.global_ranks));
    }
    if (n > 1) {
      if (!ctx_ || ctx_->size != n || ctx_->rank != spec_.rank) {
        throw std::invalid_argument(
            "make_gloo_communicator: gloo context does not match group '" +
            spec_.name + "'");
      }
    }
    if (spec_.chunk_bytes < 4096) spec_.chunk_bytes = 4096;
    spec_.chunk_bytes = spec_.chunk_bytes / 64 * 64;
    dead_.assign(n, 0);
    if (n > 1) {
      monitor_ = std::thread([this] { monitor_loop(); });
      worker_ = std::thread([this] {
        // gloo writes to sockets with writev: a peer that died would raise
        // SIGPIPE (fatal by default) instead of EPIPE. Block it here for
        // good; a pending SIGPIPE on this thread is then never delivered.
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        worker_loop();
      });
      name_thread(worker_, "gs-gloo-" + spec_.name);
      name_thread(monitor_, "gs-mon-" + spec_.name);
    }
  }

  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      stopping_ = true;
      for (auto* b : active_) {
        b->abortWaitRecv();
        b->abortWaitSend();
      }
      if (sentinel_) sentinel_->abortWaitRecv();
    }
    if (worker_.joinable()) worker_.join();
    if (monitor_.joinable()) monitor_.join();
    // The sentinel still has receives posted on every pair, which Gloo's
    // loop thread fails (signals) when a pair breaks. Closing the pairs
    // fails them now and waits for the loop, so that the sentinel can go.
    if (monitor_sentinel_) {
      try {
        ctx_->closeConnections();
      } catch (...) {
      }
      std::lock_guard<std::mutex> lock(active_mu_);
      monitor_probe_.reset();
      monitor_sentinel_.reset();
    }
    for (auto& t : queue_) {
      t.work->finish(
          describe(t.op, t.opts.tag) +
          " failed: the communicator was destroyed before it ran");
    }
    queue_.clear();
    // ctx_ (pairs, device loop thread) goes last, after the worker is gone.
  }

  int rank() const override { return spec_.rank; }
  int size() const override { return static_cast<int>(spec_.global_ranks.size()); }
  const std::vector<int>& global_ranks() const override { return spec_.global_ranks; }
  std::string backend_name() const override { return "gloo"; }
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  std::shared_ptr<gloo::Context> context() const { return ctx_; }
  bool aborted() const { return aborted_.load(); }

  // ------------------------------------------------------------------ API

  WorkPtr all_gather_into(at::Tensor output, at::Tensor input,
                          const CollectiveOptions& opts) override {
    static constexpr const char* op = "all_gather_into";
    check_tensor(op, output, "output");
    check_tensor(op, input, "input");
    if (output.scalar_type() != input.scalar_type()) {
      throw CommError(std::string(op) + ": output dtype " +
                      std::string(c10::toString(output.scalar_type())) +
                      " differs from input dtype " +
                      c10::toString(input.scalar_type()));
    }
    if (output.numel() != size() * input.numel()) {
      throw CommError(std::string(op) + ": output.numel() (" +
                      std::to_string(output.numel()) + ") must be size() (" +
                      std::to_string(size()) + ") * input.numel() (" +
                      std::to_string(input.numel()) + ")");
    }
    const size_t block = input.numel() * input.element_size();
    if (size() == 1) {
      copy_bytes(output.data_ptr(), input.data_ptr(), block);
      return completed_work();
    }
    return submit(op, opts, [this, output, input, block](Run& run) {
      char* out = static_cast<char*>(output.data_ptr());
      copy_bytes(out + rank() * block, input.data_ptr(), block);
      ring_allgather(run, out, Blocks::uniform(size(), block));
    });
  }

  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp rop,
                         const CollectiveOptions& opts) override {
    static constexpr const char* op = "reduce_scatter";
    check_tensor(op, output, "output");
    check_tensor(op, input, "input");
    check_reducible(op, input);
    if (output.scalar_type() != input.scalar_type()) {
      throw CommError(std::string(op) + ": output dtype " +
                      std::string(c10::toString(output.scalar_type())) +
                      " differs from input dtype " +
                      c10::toString(input.scalar_type()));
    }
    if (input.numel() != size() * output.numel()) {
      throw CommError(std::string(op) + ": input.numel() (" +
                      std::to_string(input.numel()) + ") must be size() (" +
                      std::to_string(size()) + ") * output.numel() (" +
                      std::to_string(output.numel()) + ")");
    }
    if (size() == 1) {
      copy_bytes(output.data_ptr(), input.data_ptr(),
                 output.numel() * output.element_size());
      return completed_work();
    }
    return submit(op, opts, [this, output, input, rop](Run& run) {
      const size_t count = output.numel();
      const int div = rop == ReduceOp::kAvg ? size() : 1;
      const auto blocks = Blocks::uniform(size(), count);
      switch (input.scalar_type()) {
        case at::kFloat:
          ring_reduce_scatter<float>(run, input.data_ptr<float>(), output.data_ptr<float>(),
                                     blocks, div);
          break;
        case at::kDouble:
          ring_reduce_scatter<double>(run, input.data_ptr<double>(), output.data_ptr<double>(),
                                      blocks, div);
          break;
        case at::kBFloat16:
          ring_reduce_scatter<c10::BFloat16>(run, input.data_ptr<c10::BFloat16>(),
                                             output.data_ptr<c10::BFloat16>(), blocks, div);
          break;
        default:
          ring_reduce_scatter<c10::Half>(run, input.data_ptr<c10::Half>(),
                                         output.data_ptr<c10::Half>(), blocks, div);
      }
    });
  }

  WorkPtr all_reduce(at::Tensor tensor, ReduceOp rop,
                     const CollectiveOptions& opts) override {
    static constexpr const char* op = "all_reduce";
    check_tensor(op, tensor, "tensor");
    check_reducible(op, tensor);
    if (size() == 1) return completed_work();
    return submit(op, opts, [this, tensor, rop](Run& run) {
      const size_t count = tensor.numel();
      const int n = size();
      const int div = rop == ReduceOp::kAvg ? n : 1;
      const auto blocks = Blocks::split(n, count);
      const size_t esize = tensor.element_size();
      char* data = static_cast<char*>(tensor.data_ptr());
      // Reduce-scatter into this rank's block of the tensor itself (in[r]
      // is read only at the last step, elementwise), then gather in place.
      switch (tensor.scalar_type()) {
        case at::kFloat:
          in_place_reduce_scatter<float>(run, tensor, blocks, div);
          break;
        case at::kDouble:
          in_place_reduce_scatter<double>(run, tensor, blocks, div);
          break;
        case at::kBFloat16:
          in_place_reduce_scatter<c10::BFloat16>(run, tensor, blocks, div);
          break;
        default:
          in_place_reduce_scatter<c10::Half>(run, tensor, blocks, div);
      }
      // The gather moves the tensor's own dtype (bf16 stays 2 bytes).
      ring_allgather(run, data, blocks.scaled(esize));
    });
  }

  WorkPtr broadcast(at::Tensor tensor, int root,
                    const CollectiveOptions& opts) override {
    static constexpr const char* op = "broadcast";
    check_tensor(op, tensor, "tensor");
    if (root < 0 || root >= size()) {
      throw CommError(std::string(op) + ": root " + std::to_string(root) +
                      " is not a group rank (size " + std::to_string(size()) + ")");
    }
    if (size() == 1) return completed_work();
    return submit(op, opts, [this, tensor, root](Run& run) {
      chain_broadcast(run, static_cast<char*>(tensor.data_ptr()),
                      tensor.numel() * tensor.element_size(), root);
    });
  }

  WorkPtr barrier(const CollectiveOptions& opts) override {
    if (size() == 1) return completed_work();
    return submit("barrier", opts, [this](Run& run) { all_to_all_barrier(run); });
  }

 private:
  friend class Buf;

  // ------------------------------------------------------------ helpers

  static void copy_bytes(void* dst, const void* src, size_t n) {
    if (dst != src && n > 0) std::memmove(dst, src, n);
  }

  void check_tensor(const char* op, const at::Tensor& t, const char* what) const {
    if (!t.defined()) {
      throw CommError(std::string(op) + ": " + what + " is an undefined tensor");
    }
    if (t.layout() != at::kStrided) {
      throw CommError(std::string("backend gloo does not support non-strided (sparse) tensors (") +
                      op + " " + what + ")");
    }
    if (!t.device().is_cpu()) {
      throw CommError("backend gloo does not support " + t.device().str() +
                      " tensors (" + op + " " + what + ")");
    }
    if (!t.is_contiguous()) {
      throw CommError(std::string("backend gloo does not support non-contiguous tensors (") +
                      op + " " + what + ")");
    }
  }

  void check_reducible(const char* op, const at::Tensor& t) const {
    switch (t.scalar_type()) {
      case at::kFloat:
      case at::kDouble:
      case at::kBFloat16:
      case at::kHalf:
        return;
      default:
        throw CommError(std::string("backend gloo does not support ") + op +
                        " of dtype " + c10::toString(t.scalar_type()) +
                        " (float32, float64, bfloat16, float16 only)");
    }
  }

  std::string describe(const char* op, const std::string& tag) const {
    return describe_collective(op, tag, spec_.name, spec_.global_ranks, spec_.rank);
  }

  // "global rank X"; for a wait not tied to one peer (-1, the barrier):
  // the only peer of a two-member group, else "a peer".
  std::string peer_str(int group_rank) const {
    if (group_rank < 0 && size() == 2) group_rank = 1 - spec_.rank;
    if (group_rank < 0) return "a peer";
    return "global rank " + std::to_string(spec_.global_ranks[group_rank]);
  }

  WorkPtr submit(const char* op, const CollectiveOptions& opts,
                 std::function<void(Run&)> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.load()) {
      return failed_work(describe(op, opts.tag) +
                         " failed: the communicator was aborted by an earlier error: " +
                         first_error_);
    }
    auto work = std::make_shared<GlooWork>();
    queue_.push_back(Task{op, opts, std::move(fn), work});
    cv_.notify_one();
    return work;
  }

  void worker_loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;  // the destructor fails what is left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      execute(task);
    }
  }

  void execute(Task& task) {
    if (aborted_.load()) {
      std::string first;
      {
        std::lock_guard<std::mutex> lock(mu_);
        first = first_error_;
      }
      task.work->finish(
          describe(task.op, task.opts.tag) +
          " failed: the communicator was aborted by an earlier error: " + first);
      return;
    }
    const milliseconds timeout =
        task.opts.timeout.count() > 0 ? task.opts.timeout : spec_.timeout;
    Run run{Clock::now() + timeout, timeout, 0};
    std::string cause;
    try {
      run.slot = static_cast<uint64_t>(ctx_->nextSlot());
      task.fn(run);
      task.work->finish();
      return;
    } catch (const std::exception& e) {
      cause = e.what();
    } catch (...) {
      cause = "unknown exception";
    }
    {
      std::string msg = describe(task.op, task.opts.tag) + " failed: " + cause;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (first_error_.empty()) first_error_ = msg;
        aborted_.store(true);
      }
      // Reset every connection of this group: peers blocked on us fail now
      // rather than at their own deadline. This group is unusable anyway.
      try {
        ctx_->closeConnections();
      } catch (...) {
      }
      task.work->finish(msg);
    }
  }

  // ----------------------------------------------------- transport ops
  // Each wraps the gloo call so that errors name the peer.

  [[noreturn]] void peer_failure(int peer, const char* what, const std::exception& e,
                                 const Run& run) {
    std::string m = e.what();
    if (m.find("Timed out") != std::string::npos || Clock::now() >= run.deadline) {
      throw CommError("timed out after " + std::to_string(run.timeout.count()) +
                      " ms waiting to " + what + " " + peer_str(peer) +
                      " (the peer did not reach this collective, is stuck, or the link to it is down): " + m);
    }
    throw CommError("connection to " + peer_str(peer) + " failed while waiting to " + what +
                    " it (peer exited or crashed?): " + m);
  }

  void post_send(Buf& b, int peer, uint64_t slot, size_t off, size_t n, const Run& run) {
    try {
      b.get()->send(peer, slot, off, n);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      peer_failure(peer, "send to", e, run);
    }
    bytes_sent_.fetch_add(n, std::memory_order_relaxed);
  }

  void post_recv(Buf& b, int peer, uint64_t slot, size_t off, size_t n, const Run& run) {
    try {
      b.get()->recv(peer, slot, off, n);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      peer_failure(peer, "receive from", e, run);
    }
  }

  milliseconds remaining(const Run& run, int peer, const char* what) {
    auto rem = std::chrono::ceil<milliseconds>(run.deadline - Clock::now());
    if (rem.count() <= 0) {
      throw CommError("timed out after " + std::to_string(run.timeout.count()) +
                      " ms waiting to " + what + " " + peer_str(peer) +
                      " (the peer did not reach this collective, is stuck, or the link to it is down)");
    }
    return rem;
  }

  void wait_recv(Buf& b, int peer, const Run& run) { wait_op(b, true, peer, run); }
  void wait_send(Buf& b, int peer, const Run& run) { wait_op(b, false, peer, run); }

  // Waits for one completion of a recv (or send) on `b` with `peer` (group
  // rank; -1: any). Fails at the deadline, when the communicator is
  // destroyed, or at once when the peer monitor found `peer` gone: gloo does
  // not fail an operation already in flight on a pair that breaks, so
  // without the monitor such a wait would only end at its deadline.
  void wait_op(Buf& b, bool recv, int peer, const Run& run) {
    const char* what = recv ? "receive from" : "send to";
    const milliseconds rem = remaining(run, peer, what);
    bool known_dead = false;
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      if (stopping_) throw_destroyed();
      known_dead = peer >= 0 ? dead_[peer] != 0 : any_dead_;
      if (!known_dead) current_ = CurrentWait{b.get(), peer, recv};
    }
    if (known_dead) return finish_with_dead_peer(b, recv, peer);
    bool ok = false;
    std::exception_ptr error;
    try {
      ok = recv ? b.get()->waitRecv(nullptr, rem) : b.get()->waitSend(nullptr, rem);
    } catch (...) {
      error = std::current_exception();
    }
    bool destroyed = false, lost = false;
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      current_ = CurrentWait{};
      destroyed = stopping_;
      lost = peer >= 0 ? dead_[peer] != 0 : any_dead_;
    }
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        peer_failure(peer, what, e, run);
      }
    }
    if (ok) return;
    if (destroyed) throw_destroyed();
    if (lost) return finish_with_dead_peer(b, recv, peer);
    throw CommError(std::string("wait to ") + what + " " + peer_str(peer) + " was aborted");
  }

  [[noreturn]] static void throw_destroyed() {
    throw CommError("aborted: the communicator was destroyed while the collective was in flight");
  }

  // `peer` is gone. Everything it delivered before its connection broke has
  // been accounted for already, so a completion is either there now or
  // never. (A failed probe also makes gloo close every pair of this group,
  // which tells the other members at once.)
  void finish_with_dead_peer(Buf& b, bool recv, int peer) {
    try {
      const bool ok = recv ? b.get()->waitRecv(nullptr, milliseconds(1))
                           : b.get()->waitSend(nullptr, milliseconds(1));
      if (ok) return;
    } catch (...) {
    }
    std::string msg;
    std::vector<int> gone;
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      msg = dead_msg_;
      for (int p = 0; p < size(); ++p) {
        if (dead_[p]) gone.push_back(spec_.global_ranks[p]);
      }
    }
    throw CommError(std::string("connection to ") +
                    (peer >= 0 ? peer_str(peer) : "global ranks " + format_ranks(gone)) +
                    " lost while waiting to " + (recv ? "receive from" : "send to") +
                    " it (peer exited or crashed?): " + msg);
  }

  // Peer monitor: a 1-byte receive from every peer on a slot nobody sends
  // to. gloo fails it when any connection of the group breaks; the monitor
  // then finds which peers are gone (a new receive on a broken pair throws)
  // and aborts the worker's current wait if it depends on one of them.
  void monitor_loop() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    const int n = size(), r = rank();
    gloo::transport::UnboundBuffer* sentinel = nullptr;
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      if (stopping_) return;
      monitor_mem_.assign(n, 0);
      monitor_sentinel_ = ctx_->createUnboundBuffer(monitor_mem_.data(), monitor_mem_.size());
      sentinel = sentinel_ = monitor_sentinel_.get();
    }
    std::string failure;
    try {
      for (int p = 0; p < n; ++p) {
        if (p != r) sentinel->recv(p, kMonitorSlot, p, 1);
      }
      // Effectively forever: gloo treats the end of a wait as a timeout of
      // the whole group.
      const bool ok = sentinel->waitRecv(nullptr, std::chrono::hours(24 * 365 * 50));
      failure = ok ? "unexpected message on the monitor slot" : "";
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty()) {  // aborted by the destructor
      std::lock_guard<std::mutex> lock(active_mu_);
      sentinel_ = nullptr;
      return;
    }
    std::vector<int> gone;
    {
      // (kept until the destructor, as the sentinel: its receives stay
      // posted on the pairs that are alive)
      monitor_probe_mem_.assign(n, 0);
      monitor_probe_ = ctx_->createUnboundBuffer(monitor_probe_mem_.data(), monitor_probe_mem_.size());
      auto& probe = monitor_probe_;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        try {
          probe->recv(p, kMonitorSlot + 1, p, 1);
        } catch (...) {
          gone.push_back(p);
        }
      }
    }
    std::lock_guard<std::mutex> lock(active_mu_);
    sentinel_ = nullptr;
    if (gone.empty()) {  // cannot tell: assume every peer
      for (int p = 0; p < n; ++p) gone.push_back(p);
    }
    for (int p : gone) {
      if (p != r) dead_[p] = 1;
    }
    any_dead_ = true;
    dead_msg_ = failure;
    if (current_.buf && (current_.peer < 0 || dead_[current_.peer])) {
      if (current_.recv) {
        current_.buf->abortWaitRecv();
      } else {
        current_.buf->abortWaitSend();
      }
    }
  }

  // ------------------------------------------------------- algorithms

  // Ring all-gather in place over `base`: block rank() already holds this
  // rank's data; afterwards every block holds its owner's data. Byte units.
  void ring_allgather(Run& run, char* base, const Blocks& blk) {
    const int n = size(), r = rank();
    const int left = (r - 1 + n) % n, right = (r + 1) % n;
    const size_t chunk = spec_.chunk_bytes;
    if (blk.total == 0) return;
    Buf buf(*this, base, blk.total);
    // Receives: step s brings block (r-1-s) from the left, chunk by chunk,
    // in the order the left neighbour sends them.
    for (int s = 0; s < n - 1; ++s) {
      const int b = ((r - 1 - s) % n + n) % n;
      for_chunks(blk.off[b], blk.len[b], chunk, [&](size_t o, size_t l) {
        post_recv(buf, left, run.slot, o, l, run);
      });
    }
    size_t sends = 0;
    for_chunks(blk.off[r], blk.len[r], chunk, [&](size_t o, size_t l) {
      post_send(buf, right, run.slot, o, l, run);
      ++sends;
    });
    // Step s forwards block (r-s), received during step s-1.
    for (int s = 1; s < n - 1; ++s) {
      const int b = ((r - s) % n + n) % n;
      for_chunks(blk.off[b], blk.len[b], chunk, [&](size_t o, size_t l) {
        wait_recv(buf, left, run);
        post_send(buf, right, run.slot, o, l, run);
        ++sends;
      });
    }
    const int last = (r + 1) % n;  // block of the final step
    for_chunks(blk.off[last], blk.len[last], chunk,
               [&](size_t, size_t) { wait_recv(buf, left, run); });
    for (size_t i = 0; i < sends; ++i) wait_send(buf, right, run);
  }

  template <typename T>
  void in_place_reduce_scatter(Run& run, const at::Tensor& t, const Blocks& blk, int div) {
    T* p = t.data_ptr<T>();
    ring_reduce_scatter<T>(run, p, p + blk.off[rank()], blk, div);
  }

  // Ring reduce-scatter: out (len[r] elements) = op over ranks of in's block
  // r, accumulated in acc_t<T>. `in` is only read; out may alias in +
  // off[r]. Step 0 sends the input as it is (T); later steps send partial
  // sums in acc_t<T> (fp32 for bf16/fp16), so low precision never rounds an
  // intermediate sum. Element units.
  template <typename T>
  void ring_reduce_scatter(Run& run, const T* in, T* out, const Blocks& blk, int avg_div) {
    using A = acc_t<T>;
    constexpr bool kSame = std::is_same_v<T, A>;
    const int n = size(), r = rank();
    const int left = (r - 1 + n) % n, right = (r + 1) % n;
    const size_t chunk = std::max<size_t>(1, spec_.chunk_bytes / sizeof(T));
    auto recv_block = [&](int s) { return ((r - s - 2) % n + 2 * n) % n; };
    auto align = [](size_t x) { return (x + 63) / 64 * 64; };
    if (blk.total == 0) return;
    // Scratch (bytes): region s receives the left neighbour's step-s data
    // (T for s = 0, A after); `partial0` holds step 0's sum when T != A.
    std::vector<size_t> sc_off(n - 1);
    size_t sc_bytes = 0;
    for (int s = 0; s < n - 1; ++s) {
      sc_off[s] = sc_bytes;
      sc_bytes += align(blk.len[recv_block(s)] * (s == 0 ? sizeof(T) : sizeof(A)));
    }
    size_t partial0_off = sc_off[0];
    if (!kSame && n > 2) {
      partial0_off = sc_bytes;
      sc_bytes += align(blk.len[recv_block(0)] * sizeof(A));
    }
    sc_bytes = std::max<size_t>(sc_bytes, 64);
    char* sc = static_cast<char*>(scratch_.get(sc_bytes));
    Buf in_buf(*this, const_cast<T*>(in), blk.total * sizeof(T));
    Buf sc_buf(*this, sc, sc_bytes);
    for (int s = 0; s < n - 1; ++s) {
      const size_t es = s == 0 ? sizeof(T) : sizeof(A);
      for_chunks(0, blk.len[recv_block(s)], chunk, [&](size_t o, size_t l) {
        post_recv(sc_buf, left, run.slot, sc_off[s] + o * es, l * es, run);
      });
    }
    size_t in_sends = 0, sc_sends = 0;
    {
      const int b = (r - 1 + n) % n;  // step 0: own contribution to block r-1
      for_chunks(blk.off[b], blk.len[b], chunk, [&](size_t o, size_t l) {
        post_send(in_buf, right, run.slot, o * sizeof(T), l * sizeof(T), run);
        ++in_sends;
      });
    }
    for (int s = 0; s < n - 1; ++s) {
      const int b = recv_block(s);
      const T* mine = in + blk.off[b];
      const T* got_t = reinterpret_cast<const T*>(sc + sc_off[s]);  // s == 0
      A* got_a = reinterpret_cast<A*>(sc + sc_off[s]);              // s > 0
      A* acc = s == 0 ? reinterpret_cast<A*>(sc + partial0_off) : got_a;
      const size_t acc_off = s == 0 ? partial0_off : sc_off[s];
      for_chunks(0, blk.len[b], chunk, [&](size_t o, size_t l) {
        wait_recv(sc_buf, left, run);
        if (s < n - 2) {
          if (s == 0) {
            reduce_to_acc(acc + o, got_t + o, mine + o, l);
          } else {
            reduce_to_acc(acc + o, got_a + o, mine + o, l);
          }
          post_send(sc_buf, right, run.slot, acc_off + o * sizeof(A), l * sizeof(A), run);
          ++sc_sends;
        } else if (s == 0) {  // n == 2; b == r
          reduce_final(out + o, got_t + o, mine + o, l, avg_div);
        } else {
          reduce_final(out + o, got_a + o, mine + o, l, avg_div);
        }
      });
    }
    for (size_t i = 0; i < in_sends; ++i) wait_send(in_buf, right, run);
    for (size_t i = 0; i < sc_sends; ++i) wait_send(sc_buf, right, run);
  }

  // Pipelined chain root -> root+1 -> ... -> root-1.
  void chain_broadcast(Run& run, char* data, size_t bytes, int root) {
    const int n = size(), r = rank();
    const int pos = (r - root + n) % n;
    const int prev = (r - 1 + n) % n, next = (r + 1) % n;
    const size_t chunk = spec_.chunk_bytes;
    if (bytes == 0) return;
    Buf buf(*this, data, bytes);
    size_t sends = 0;
    if (pos == 0) {
      for_chunks(0, bytes, chunk, [&](size_t o, size_t l) {
        post_send(buf, next, run.slot, o, l, run);
        ++sends;
      });
    } else {
      for_chunks(0, bytes, chunk, [&](size_t o, size_t l) {
        post_recv(buf, prev, run.slot, o, l, run);
      });
      for_chunks(0, bytes, chunk, [&](size_t o, size_t l) {
        wait_recv(buf, prev, run);
        if (pos < n - 1) {
          post_send(buf, next, run.slot, o, l, run);
          ++sends;
        }
      });
    }
    for (size_t i = 0; i < sends; ++i) wait_send(buf, next, run);
  }

  void all_to_all_barrier(Run& run) {
    const int n = size(), r = rank();
    char token = 1;
    std::vector<char> got(n, 0);
    Buf sbuf(*this, &token, 1);
    Buf rbuf(*this, got.data(), got.size());
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      post_recv(rbuf, p, run.slot, p, 1, run);
      post_send(sbuf, p, run.slot, 0, 1, run);
    }
    // Completions are not tied to a peer (-1: "a peer").
    for (int i = 0; i < n - 1; ++i) wait_recv(rbuf, -1, run);
    for (int i = 0; i < n - 1; ++i) wait_send(sbuf, -1, run);
  }

  // ------------------------------------------------------------- state

  GlooGroupSpec spec_;
  std::shared_ptr<gloo::Context> ctx_;

  std::mutex mu_;  // queue_, stop_, first_error_
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::string first_error_;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> bytes_sent_{0};

  // Slots of the peer monitor; collectives use ctx->nextSlot() (counting up
  // from 0) and gloo's algorithms (prefix << 56) with small prefixes.
  static constexpr uint64_t kMonitorSlot = uint64_t{0x7e} << 56;

  struct CurrentWait {
    gloo::transport::UnboundBuffer* buf = nullptr;
    int peer = -1;
    bool recv = true;
  };

  std::mutex active_mu_;  // everything down to monitor_
  std::vector<gloo::transport::UnboundBuffer*> active_;
  bool stopping_ = false;
  CurrentWait current_;                          // the worker's blocking wait
  std::vector<char> dead_;                       // per group rank
  bool any_dead_ = false;
  std::string dead_msg_;                         // why the monitor woke
  gloo::transport::UnboundBuffer* sentinel_ = nullptr;
  // The monitor's buffer and its memory live as long as the communicator,
  // not only as long as the monitor's wait: when the group fails, the worker
  // closes its connections, and closing each pair fails (signals) the
  // sentinel's pending receive, possibly after the monitor has woken.
  std::vector<char> monitor_mem_, monitor_probe_mem_;
  std::unique_ptr<gloo::transport::UnboundBuffer> monitor_sentinel_, monitor_probe_;
  std::thread monitor_;

  // Worker-thread scratch, reused across collectives.
  Scratch scratch_;

  std::thread worker_;  // last: started after everything above exists
};

Buf::Buf(GlooCommunicator& comm, void* ptr, size_t bytes) : comm_(comm) {
  std::lock_guard<std::mutex> lock(comm_.active_mu_);
  if (comm_.stopping_) {
    throw CommError("aborted: the communicator was destroyed while the collective was in flight");
  }
  buf_ = comm_.ctx_->createUnboundBuffer(ptr, bytes);
  comm_.active_.push_back(buf_.get());
}

Buf::~Buf() {
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    try {
      comm_.ctx_->closeConnections();  // (the failed task's own handler does it again: harmless)
    } catch (...) {
    }
  }
  std::lock_guard<std::mutex> lock(comm_.active_mu_);
  auto& a = comm_.active_;
  a.erase(std::remove(a.begin(), a.end(), buf_.get()), a.end());
}

}  // namespace

CommunicatorPtr make_gloo_communicator(GlooGroupSpec spec,
                                       std::shared_ptr<gloo::Context> context) {
  return std::make_shared<GlooCommunicator>(std::move(spec), std::move(context));
}

std::shared_ptr<gloo::Context> gloo_context_of(const Communicator& comm) {
  if (auto* g = dynamic_cast<const GlooCommunicator*>(&comm)) return g->context();
  return nullptr;
}

bool gloo_is_aborted(const Communicator& comm) {
  if (auto* g = dynamic_cast<const GlooCommunicator*>(&comm)) return g->aborted();
  return false;
}

}  // namespace shard::detail
