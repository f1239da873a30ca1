// NCCL (CUDA) communicator. Compiled only with GREENSHARD_CUDA (and by the
// compile-only target shard_nccl_compile_check); see communicator_nccl.h.
//
// Streams: every CUDA device has two dedicated high-priority streams shared
// by all communicators on it: the all-gather stream (all_gather_into,
// broadcast) and the reduce-scatter stream (reduce_scatter, all_reduce,
// barrier). FSDP issues parameter all-gathers and gradient reduce-scatters
// on two different communicators of the shard group, so a prefetch never
// queues behind a reduction on the GPU either.
//
// Ordering (no host synchronization on the hot path):
//  * issue: an event recorded on the caller's current stream is waited by
//    the collective's stream, so inputs written and outputs allocated on the
//    compute stream are ready; the previous collective of the same
//    communicator is waited too when it ran on the other stream (NCCL
//    requires one communicator's operations to run in issue order).
//  * Work::wait(): the caller's current stream (and the stream the
//    collective was issued from) waits for the collective's end event.
// Memory: outputs and inputs belong to the caller's stream (the caching
// allocator's stream of the block). The Work holds references to them until
// the caller's stream is ordered after the collective (wait()) or the
// collective finished (the watchdog saw its event), so a block is never
// reused by the caller's stream while NCCL still uses it, without
// recordStream (whose delayed frees made FSDP1's memory grow). Temporaries
// of the fp32-accumulation casts are allocated on the collective's own
// stream and freed there.
//
// Errors: a watchdog thread polls ncclCommGetAsyncError and the end event
// and deadline of every pending collective (every 5 ms). On an NCCL error
// or a deadline it marks the communicator aborted, fails every pending Work
// with a CommError ("<op> (tag: ...) on group 'g' (global ranks [..]) at
// global rank r (group rank k) failed: ..."), then calls ncclCommAbort,
// which makes the NCCL kernels still in flight return, so streams waiting on
// them move on. Every later call fails at once with the first error. With
// the stream-ordered wait the error surfaces at the next wait() or call of
// this communicator; GREENSHARD_NCCL_BLOCKING_WAIT=1 makes wait() block the
// host until the collective finished (or failed).
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0, NCCL >=
// 2.14): initialization and the lazy connection set-up of a first
// collective poll ncclCommGetAsyncError with the deadline instead of
// hanging inside NCCL when a member never shows up.
#include "communicator_nccl.h"
#include "thread_name.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "GreenShard needs NCCL >= 2.10 (ncclAvg, ncclBfloat16)"
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define GS_NCCL_NONBLOCKING 1
#else
#define GS_NCCL_NONBLOCKING 0
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
#define GS_NCCL_HAS_LAST_ERROR 1
#else
#define GS_NCCL_HAS_LAST_ERROR 0
#endif

namespace shard::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string nccl_error_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
#if GS_NCCL_HAS_LAST_ERROR
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (") + last + ")";
#endif
  return s;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear a sticky-free error
    throw CommError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
  }
}

// --------------------------------------------------------------------------
// The communicator's own stream.
//
// One dedicated high-priority stream per communicator, never shared: NCCL
// kernels of different communicators on one stream run in issue order, and
// that order may differ between ranks (HSDP issues a replicate all-reduce
// when a reduce-scatter has completed, a per-rank timing): on a shared
// stream two ranks can each wait behind the collective the other has not
// reached yet (a cycle). FSDP's shard group has two communicators (/ag/,
// /rs/), so all-gathers and reduce-scatters still run on separate streams.
// Created outside the pool (which hands out 32 streams round robin, so two
// communicators could get the same one) and never destroyed: the caching
// allocator may still hold blocks recorded against it; communicators are
// few and live as long as the process.
c10::cuda::CUDAStream dedicated_stream(c10::DeviceIndex device) {
  c10::cuda::CUDAGuard guard(device);
  int least = 0, greatest = 0;
  cuda_check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
  cudaStream_t raw = nullptr;
  cuda_check(cudaStreamCreateWithPriority(&raw, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority");
  return c10::cuda::getStreamFromExternal(raw, device);
}

// --------------------------------------------------------------------------
// Work

// As GlooWork (communicator_gloo.cpp): the error is kept as its message,
// and each wait()/error() makes an exception object of its own, never one
// shared with the watchdog thread.
class NcclWork final : public Work {
 public:
  NcclWork(std::string desc, Clock::time_point deadline, milliseconds timeout,
           c10::cuda::CUDAStream issue_stream, bool blocking)
      : desc_(std::move(desc)), deadline_(deadline), timeout_(timeout),
        issue_stream_(issue_stream), blocking_(blocking) {}

  // A Work that failed before it was issued.
  static std::shared_ptr<NcclWork> failed(const std::string& msg, c10::cuda::CUDAStream s) {
    auto w = std::make_shared<NcclWork>("", Clock::now(), milliseconds(0), s, false);
    w->fail(msg);
    return w;
  }

  bool is_completed() override {
    if (done_.load(std::memory_order_acquire)) return true;
    if (!recorded_) return false;
    bool ready = false;
    try {
      ready = end_.query();
    } catch (const std::exception& e) {
      fail(desc_ + " failed: " + e.what());
      return true;
    }
    if (ready) mark_done();
    return ready;
  }

  void wait() override {
    throw_if_failed();
    if (recorded_) {
      // Order the caller's stream (and the issuing one) after the collective.
      const auto dev = issue_stream_.device_index();
      auto current = c10::cuda::getCurrentCUDAStream(dev);
      end_.block(current);
      if (current != issue_stream_) end_.block(issue_stream_);
      release();  // the streams that own the tensors are ordered now
      if (blocking_) {
        auto sleep = std::chrono::microseconds(20);
        while (!is_completed()) {
          std::this_thread::sleep_for(sleep);
          sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
        }
      }
    }
    throw_if_failed();
  }

  std::exception_ptr error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_ ? std::make_exception_ptr(CommError(error_)) : nullptr;
  }

  // --- communicator side ---
  void keep(std::vector<at::Tensor> t) {
    std::lock_guard<std::mutex> lock(mu_);
    keep_ = std::move(t);
  }
  void record_end(const c10::cuda::CUDAStream& s) {
    end_.record(s);
    recorded_ = true;
  }
  void fail(const std::string& msg) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_) failed_ = true, error_ = msg;
    }
    done_.store(true, std::memory_order_release);
  }
  // The collective finished on the GPU: its tensors may go.
  void mark_done() {
    done_.store(true, std::memory_order_release);
    release();
  }
  bool query_end() { return !recorded_ || end_.query(); }
  bool done() const { return done_.load(std::memory_order_acquire); }
  const std::string& desc() const { return desc_; }
  Clock::time_point deadline() const { return deadline_; }
  milliseconds timeout() const { return timeout_; }
  bool blocking() const { return blocking_; }

 private:
  void throw_if_failed() {
    std::string msg;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_) return;
      msg = error_;
    }
    throw CommError(msg);
  }
  void release() {
    std::vector<at::Tensor> drop;
    std::lock_guard<std::mutex> lock(mu_);
    drop.swap(keep_);
  }

  const std::string desc_;
  const Clock::time_point deadline_;
  const milliseconds timeout_;
  const c10::cuda::CUDAStream issue_stream_;
  const bool blocking_;
  at::cuda::CUDAEvent end_{cudaEventDisableTiming};
  bool recorded_ = false;  // set before the Work is published
  std::atomic<bool> done_{false};
  std::mutex mu_;
  bool failed_ = false;
  std::string error_;
  std::vector<at::Tensor> keep_;
};

// --------------------------------------------------------------------------

struct NcclDtype {
  ncclDataType_t type;
  bool low_precision;
};

std::optional<NcclDtype> reducible_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return NcclDtype{ncclFloat32, false};
    case at::kDouble: return NcclDtype{ncclFloat64, false};
    case at::kHalf: return NcclDtype{ncclFloat16, true};
    case at::kBFloat16: return NcclDtype{ncclBfloat16, true};
    case at::kInt: return NcclDtype{ncclInt32, false};
    case at::kLong: return NcclDtype{ncclInt64, false};
    default: return std::nullopt;
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(NcclGroupSpec spec, const NcclStore& store) : spec_(std::move(spec)) {
    const int n = static_cast<int>(spec_.global_ranks.size());
    if (n < 1 || spec_.rank < 0 || spec_.rank >= n) {
      throw std::invalid_argument("make_nccl_communicator: rank " + std::to_string(spec_.rank) +
                                  " outside group " + format_ranks(spec_.global_ranks));
    }
    if (spec_.device < 0) spec_.device = c10::cuda::current_device();
    device_ = static_cast<c10::DeviceIndex>(spec_.device);
    stream_.emplace(dedicated_stream(device_));
    connect(store);
    watchdog_ = std::thread([this] { watchdog_loop(); });
    name_thread(watchdog_, "gs-nccl-" + spec_.name);
  }

  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    std::lock_guard<std::mutex> issue(issue_mu_);
    // Let what is in flight finish (bounded), then free the communicator;
    // abort it when something does not finish.
    std::deque<std::shared_ptr<NcclWork>> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending.swap(pending_);
    }
    bool clean = !aborted_.load();
    const auto deadline = Clock::now() + spec_.timeout;
    try {
      c10::cuda::CUDAGuard guard(device_);
      for (auto& w : pending) {
        while (clean && !w->query_end()) {
          if (Clock::now() >= deadline) clean = false;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (clean) {
          w->mark_done();
        } else {
          w->fail(w->desc() + " failed: the communicator was destroyed before the collective finished");
        }
      }
    } catch (...) {
      clean = false;
    }
    if (!comm_) return;
    if (clean) {
#if GS_NCCL_NONBLOCKING
      ncclResult_t r = ncclCommFinalize(comm_);
      if (r == ncclSuccess || r == ncclInProgress) {
        if (poll_in_progress(deadline) != ncclSuccess) clean = false;
      } else {
        clean = false;
      }
#endif
    }
    if (clean) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }

  int rank() const override { return spec_.rank; }
  int size() const override { return static_cast<int>(spec_.global_ranks.size()); }
  const std::vector<int>& global_ranks() const override { return spec_.global_ranks; }
  std::string backend_name() const override { return "nccl"; }
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }
  bool aborted() const { return aborted_.load(); }

  // ------------------------------------------------------------------ API

  WorkPtr all_gather_into(at::Tensor output, at::Tensor input,
                          const CollectiveOptions& opts) override {
    static constexpr const char* op = "all_gather_into";
    if (check_tensors(op, {{&output, "output"}, {&input, "input"}}) == Where::kHost) {
      at::Tensor d_out = at::empty(output.sizes(), output.options().device(device()));
      auto w = all_gather_into(d_out, input.to(device()), opts);
      return finish_staged(w, [&] { output.copy_(d_out); });
    }
    if (output.scalar_type() != input.scalar_type()) {
      throw CommError(std::string(op) + ": output dtype " +
                      std::string(c10::toString(output.scalar_type())) +
                      " differs from input dtype " + c10::toString(input.scalar_type()));
    }
    if (output.numel() != size() * input.numel()) {
      throw CommError(std::string(op) + ": output.numel() (" + std::to_string(output.numel()) +
                      ") must be size() (" + std::to_string(size()) + ") * input.numel() (" +
                      std::to_string(input.numel()) + ")");
    }
    const size_t bytes = input.numel() * input.element_size();
    return launch(op, opts, {output, input},
                  [&](cudaStream_t s) {
                    nccl("ncclAllGather", ncclAllGather(input.data_ptr(), output.data_ptr(), bytes,
                                                        ncclUint8, comm_, s));
                    bytes_sent_.fetch_add(bytes * (size() - 1), std::memory_order_relaxed);
                  });
  }

  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp rop,
                         const CollectiveOptions& opts) override {
    static constexpr const char* op = "reduce_scatter";
    if (check_tensors(op, {{&output, "output"}, {&input, "input"}}) == Where::kHost) {
      throw CommError(std::string("backend nccl does not support cpu tensors (") + op + ")");
    }
    const auto dt = check_reducible(op, input);
    if (output.scalar_type() != input.scalar_type()) {
      throw CommError(std::string(op) + ": output dtype " +
                      std::string(c10::toString(output.scalar_type())) +
                      " differs from input dtype " + c10::toString(input.scalar_type()));
    }
    if (input.numel() != size() * output.numel()) {
      throw CommError(std::string(op) + ": input.numel() (" + std::to_string(input.numel()) +
                      ") must be size() (" + std::to_string(size()) + ") * output.numel() (" +
                      std::to_string(output.numel()) + ")");
    }
    const auto nop = nccl_op(rop, input.scalar_type());
    const bool widen = dt.low_precision && spec_.low_precision_reduce_in_fp32;
    return launch(op, opts, {output, input}, [&](cudaStream_t s) {
      const size_t count = output.numel();
      if (widen) {
        // Temporaries on the collective's stream (the current one here).
        at::Tensor in32 = input.to(at::kFloat);
        at::Tensor out32 = at::empty({static_cast<int64_t>(count)}, in32.options());
        nccl("ncclReduceScatter", ncclReduceScatter(in32.data_ptr(), out32.data_ptr(), count,
                                                    ncclFloat32, nop, comm_, s));
        output.view({-1}).copy_(out32);
        bytes_sent_.fetch_add(count * 4 * (size() - 1), std::memory_order_relaxed);
      } else {
        nccl("ncclReduceScatter", ncclReduceScatter(input.data_ptr(), output.data_ptr(), count,
                                                    dt.type, nop, comm_, s));
        bytes_sent_.fetch_add(count * input.element_size() * (size() - 1), std::memory_order_relaxed);
      }
      finish_avg_fallback(rop, input.scalar_type(), output);
    });
  }

  WorkPtr all_reduce(at::Tensor tensor, ReduceOp rop, const CollectiveOptions& opts) override {
    static constexpr const char* op = "all_reduce";
    if (check_tensors(op, {{&tensor, "tensor"}}) == Where::kHost) {
      check_reducible(op, tensor);
      at::Tensor d = tensor.to(device());
      auto w = all_reduce(d, rop, opts);
      return finish_staged(w, [&] { tensor.copy_(d); });
    }
    const auto dt = check_reducible(op, tensor);
    const auto nop = nccl_op(rop, tensor.scalar_type());
    const bool widen = dt.low_precision && spec_.low_precision_reduce_in_fp32;
    return launch(op, opts, {tensor}, [&](cudaStream_t s) {
      const size_t count = tensor.numel();
      if (widen) {
        at::Tensor t32 = tensor.to(at::kFloat);
        nccl("ncclAllReduce", ncclAllReduce(t32.data_ptr(), t32.data_ptr(), count, ncclFloat32,
                                            nop, comm_, s));
        tensor.copy_(t32.view(tensor.sizes()));
        bytes_sent_.fetch_add(2 * count * 4 * (size() - 1) / size(), std::memory_order_relaxed);
      } else {
        nccl("ncclAllReduce", ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), count, dt.type,
                                            nop, comm_, s));
        bytes_sent_.fetch_add(2 * count * tensor.element_size() * (size() - 1) / size(),
                              std::memory_order_relaxed);
      }
      finish_avg_fallback(rop, tensor.scalar_type(), tensor);
    });
  }

  WorkPtr broadcast(at::Tensor tensor, int root, const CollectiveOptions& opts) override {
    static constexpr const char* op = "broadcast";
    const Where where = check_tensors(op, {{&tensor, "tensor"}});
    if (root < 0 || root >= size()) {
      throw CommError(std::string(op) + ": root " + std::to_string(root) +
                      " is not a group rank (size " + std::to_string(size()) + ")");
    }
    if (where == Where::kHost) {
      at::Tensor d = tensor.to(device());
      auto w = broadcast(d, root, opts);
      return finish_staged(w, [&] { tensor.copy_(d); });
    }
    const size_t bytes = tensor.numel() * tensor.element_size();
    return launch(op, opts, {tensor}, [&](cudaStream_t s) {
      nccl("ncclBroadcast", ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), bytes, ncclUint8,
                                          root, comm_, s));
      if (rank() == root && size() > 1) bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    });
  }

  // A one-element all-reduce; wait() blocks the host until every member
  // reached it.
  WorkPtr barrier(const CollectiveOptions& opts) override {
    return launch("barrier", opts, {}, [&](cudaStream_t s) {
      nccl("ncclAllReduce", ncclAllReduce(barrier_buf_.data_ptr(), barrier_buf_.data_ptr(), 1,
                                          ncclInt32, ncclSum, comm_, s));
    }, /*blocking=*/true);
  }

 private:
  enum class Where { kDevice, kHost };

  c10::Device device() const { return c10::Device(c10::kCUDA, device_); }

  std::string describe(const char* op, const std::string& tag) const {
    return describe_collective(op, tag, spec_.name, spec_.global_ranks, spec_.rank);
  }

  std::string group_str() const {
    return "group '" + spec_.name + "' (global ranks " + format_ranks(spec_.global_ranks) +
           ") at global rank " + std::to_string(spec_.global_ranks[spec_.rank]);
  }

  // All device tensors on this communicator's device, or all host tensors
  // (small host tensors, e.g. a norm for clipping, are staged through the
  // device and the call blocks).
  Where check_tensors(const char* op,
                      std::initializer_list<std::pair<const at::Tensor*, const char*>> ts) const {
    int host = 0, dev = 0;
    for (auto [t, what] : ts) {
      if (!t->defined()) throw CommError(std::string(op) + ": " + what + " is an undefined tensor");
      if (t->layout() != at::kStrided) {
        throw CommError(std::string("backend nccl does not support non-strided (sparse) tensors (") +
                        op + " " + what + ")");
      }
      if (!t->is_contiguous()) {
        throw CommError(std::string("backend nccl does not support non-contiguous tensors (") + op +
                        " " + what + ")");
      }
      if (t->device().is_cpu()) {
        ++host;
      } else if (t->device().is_cuda()) {
        if (t->device().index() != device_) {
          throw CommError("backend nccl: " + std::string(op) + " " + what + " is on " +
                          t->device().str() + " but the communicator of group '" + spec_.name +
                          "' is on " + device().str());
        }
        ++dev;
      } else {
        throw CommError("backend nccl does not support " + t->device().str() + " tensors (" + op +
                        " " + what + ")");
      }
    }
    if (host && dev) {
      throw CommError("backend nccl does not support mixing cpu and cuda tensors (" +
                      std::string(op) + ")");
    }
    return host ? Where::kHost : Where::kDevice;
  }

  NcclDtype check_reducible(const char* op, const at::Tensor& t) const {
    auto dt = reducible_dtype(t.scalar_type());
    if (!dt) {
      throw CommError(std::string("backend nccl does not support ") + op + " of dtype " +
                      c10::toString(t.scalar_type()) +
                      " (float32, float64, bfloat16, float16, int32, int64 only)");
    }
    return *dt;
  }

  // ncclAvg for floating types; integers: sum (an integer average is not
  // defined by the Communicator contract, callers use kSum).
  static ncclRedOp_t nccl_op(ReduceOp op, at::ScalarType t) {
    if (op == ReduceOp::kSum) return ncclSum;
    if (at::isFloatingType(t)) return ncclAvg;
    return ncclSum;
  }
  void finish_avg_fallback(ReduceOp op, at::ScalarType t, at::Tensor& out) const {
    if (op == ReduceOp::kAvg && !at::isFloatingType(t) && size() > 1) out.div_(size(), "floor");
  }

  // Host tensors: the device copy's collective, then a blocking wait and the
  // copy back.
  template <typename F>
  WorkPtr finish_staged(const WorkPtr& w, F&& copy_back) {
    auto* nw = dynamic_cast<NcclWork*>(w.get());
    if (nw) {
      nw->wait();  // stream order (or a host wait when blocking): the copy back runs after the collective
      copy_back();  // device -> pageable host: synchronous
      auto sleep = std::chrono::microseconds(20);
      while (!nw->is_completed()) {
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
      }
    }
    return w;  // wait() rethrows a failure
  }

  void nccl(const char* what, ncclResult_t r) {
    if (r == ncclSuccess) return;
    if (r == ncclInProgress) {
      // Non-blocking communicator: the call (e.g. a first collective that
      // sets up connections) completes asynchronously; wait for it, bounded.
      r = poll_in_progress(current_deadline_);
      if (r == ncclSuccess) return;
      if (r == ncclInProgress) {
        throw CommError("timed out after " + std::to_string(current_timeout_.count()) +
                        " ms in " + what +
                        " (connecting to the group's members: a peer did not reach this "
                        "collective, or is stuck)");
      }
    }
    throw CommError(std::string(what) + " failed: NCCL error: " + nccl_error_text(r, comm_));
  }

  ncclResult_t poll_in_progress(Clock::time_point deadline) {
    ncclResult_t state = ncclInProgress;
    auto sleep = std::chrono::microseconds(10);
    for (;;) {
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return ncclInternalError;
      if (state != ncclInProgress || Clock::now() >= deadline) return state;
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(2000));
    }
  }

  // Issues one collective on this communicator's stream: waits for the caller's
  // stream, runs `body(stream)` with that stream current, records the end.
  WorkPtr launch(const char* op, const CollectiveOptions& opts,
                 std::vector<at::Tensor> keep, const std::function<void(cudaStream_t)>& body,
                 bool blocking = false) {
    const milliseconds timeout = opts.timeout.count() > 0 ? opts.timeout : spec_.timeout;
    std::string desc = describe(op, opts.tag);
    c10::cuda::CUDAGuard guard(device_);
    const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device_);
    std::lock_guard<std::mutex> issue(issue_mu_);
    if (aborted_.load()) {
      return NcclWork::failed(desc + " failed: the communicator was aborted by an earlier error: " +
                                  first_error(),
                              caller);
    }
    const auto now = Clock::now();
    current_deadline_ = now + timeout;
    current_timeout_ = timeout;
    auto work = std::make_shared<NcclWork>(desc, now + timeout, timeout, caller,
                                           blocking || spec_.blocking_wait);
    const c10::cuda::CUDAStream stream = *stream_;
    try {
      ready_.record(caller);  // inputs written, outputs allocated
      ready_.block(stream);
      {
        c10::cuda::CUDAStreamGuard on(stream);
        body(stream.stream());
      }
      work->record_end(stream);
    } catch (const std::exception& e) {
      const std::string msg = desc + " failed: " + e.what();
      // The tensors stay referenced by the Work: a kernel already queued may
      // still touch them until the abort below has taken effect.
      work->keep(std::move(keep));
      work->fail(msg);
      abort_locked(msg, nullptr);
      return work;
    }
    work->keep(std::move(keep));
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(work);
    }
    return work;
  }

  std::string first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

  // Marks the communicator aborted, fails every pending Work (`culprit`, if
  // given, with `msg`; the others as aborted by it), then aborts NCCL so
  // kernels in flight return. Caller holds issue_mu_.
  void abort_locked(const std::string& msg, NcclWork* culprit) {
    std::deque<std::shared_ptr<NcclWork>> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_error_.empty()) first_error_ = msg;
      aborted_.store(true);
      pending.swap(pending_);
    }
    for (auto& w : pending) {
      if (w.get() == culprit) {
        w->fail(msg);
      } else {
        w->fail(w->desc() + " failed: the communicator was aborted by an earlier error: " + msg);
      }
    }
    if (comm_) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

  void watchdog_loop() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait_for(lock, milliseconds(5), [&] { return stop_; });
      if (stop_) return;
      std::vector<std::shared_ptr<NcclWork>> pending(pending_.begin(), pending_.end());
      lock.unlock();
      check(pending);
      lock.lock();
      // Drop finished works (kept in issue order).
      while (!pending_.empty() && pending_.front()->done()) pending_.pop_front();
    }
  }

  void check(const std::vector<std::shared_ptr<NcclWork>>& pending) {
    std::string failure;
    NcclWork* culprit = nullptr;
    const auto now = Clock::now();
    for (auto& w : pending) {
      if (w->done()) continue;
      bool ready = false;
      try {
        ready = w->query_end();
      } catch (const std::exception& e) {
        failure = w->desc() + " failed: " + e.what();
        culprit = w.get();
        break;
      }
      if (ready) {
        w->mark_done();
      } else if (now >= w->deadline()) {
        failure = w->desc() + " failed: timed out after " + std::to_string(w->timeout().count()) +
                  " ms waiting for the collective to finish on " + device().str() +
                  " (a peer did not reach this collective, or is stuck); the NCCL communicator "
                  "was aborted";
        culprit = w.get();
        break;
      }
    }
    std::lock_guard<std::mutex> issue(issue_mu_);
    if (aborted_.load() || !comm_) return;
    if (failure.empty()) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) state = r;
      if (state == ncclSuccess || state == ncclInProgress) return;
      const std::string what = "NCCL error: " + nccl_error_text(state, comm_) +
                               " (a peer exited or crashed, or the network failed?)";
      for (auto& w : pending) {
        if (!w->done()) {
          culprit = w.get();
          failure = w->desc() + " failed: " + what;
          break;
        }
      }
      if (failure.empty()) failure = group_str() + ": " + what;
    }
    abort_locked(failure, culprit);
  }

  void connect(const NcclStore& store) {
    const auto deadline = Clock::now() + spec_.timeout;
    auto fail = [&](const std::string& why) -> CommError {
      return CommError("new_group '" + spec_.name + "' (global ranks " +
                       format_ranks(spec_.global_ranks) + ") failed to connect (nccl) at global rank " +
                       std::to_string(spec_.global_ranks[spec_.rank]) + ": " + why);
    };
    ncclUniqueId id;
    static_assert(sizeof(id.internal) == NCCL_UNIQUE_ID_BYTES);
    try {
      if (spec_.rank == 0) {
        const ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) throw CommError("ncclGetUniqueId: " + nccl_error_text(r, nullptr));
        store.set("nccl_id", std::vector<uint8_t>(reinterpret_cast<uint8_t*>(id.internal),
                                                  reinterpret_cast<uint8_t*>(id.internal) +
                                                      NCCL_UNIQUE_ID_BYTES));
      } else {
        const auto v = store.get("nccl_id", spec_.timeout);
        if (v.size() != NCCL_UNIQUE_ID_BYTES) {
          throw CommError("the NCCL unique id in the store has " + std::to_string(v.size()) +
                          " bytes, expected " + std::to_string(NCCL_UNIQUE_ID_BYTES));
        }
        std::memcpy(id.internal, v.data(), NCCL_UNIQUE_ID_BYTES);
      }
    } catch (const CommError& e) {
      throw fail(e.what());
    } catch (const std::exception& e) {
      throw fail(std::string("exchanging the NCCL unique id through the store: ") + e.what());
    }
    c10::cuda::CUDAGuard guard(device_);
    const int n = size();
#if GS_NCCL_NONBLOCKING
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm_, n, id, spec_.rank, &config);
    if (r == ncclInProgress || (r == ncclSuccess && comm_)) r = poll_in_progress(deadline);
#else
    ncclResult_t r = ncclCommInitRank(&comm_, n, id, spec_.rank);
#endif
    if (r != ncclSuccess) {
      const std::string why =
          r == ncclInProgress
              ? "timed out after " + std::to_string(spec_.timeout.count()) +
                    " ms in ncclCommInitRank (a member did not join, or is stuck)"
              : "ncclCommInitRank: " + nccl_error_text(r, comm_);
      if (comm_) ncclCommAbort(comm_);
      comm_ = nullptr;
      throw fail(why);
    }
    barrier_buf_ = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device()));
  }

  NcclGroupSpec spec_;
  c10::DeviceIndex device_ = 0;
  std::optional<c10::cuda::CUDAStream> stream_;  // dedicated_stream
  ncclComm_t comm_ = nullptr;
  at::Tensor barrier_buf_;

  // issue_mu_: every NCCL call on comm_, the issue-side state below, abort.
  std::mutex issue_mu_;
  at::cuda::CUDAEvent ready_{cudaEventDisableTiming};
  Clock::time_point current_deadline_;
  milliseconds current_timeout_{0};

  // mu_: pending_, first_error_, stop_ (lock order: issue_mu_, then mu_).
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<NcclWork>> pending_;
  std::string first_error_;
  bool stop_ = false;
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> bytes_sent_{0};
  std::thread watchdog_;  // last
};

}  // namespace

CommunicatorPtr make_nccl_communicator(NcclGroupSpec spec, const NcclStore& store) {
  return std::make_shared<NcclCommunicator>(std::move(spec), store);
}

bool nccl_is_aborted(const Communicator& comm) {
  if (auto* c = dynamic_cast<const NcclCommunicator*>(&comm)) return c->aborted();
  return false;
}

std::string nccl_runtime_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9: major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace shard::detail
