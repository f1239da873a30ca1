// Communicator + Work: the small collective interface shard/ is built on,
// shaped like c10d's Backend/Work.
//
// Contracts (every backend):
//  * Every member of a communicator issues the same collectives in the same
//    order. Calls are asynchronous: they return a Work at once; the backend
//    runs them in issue order.
//  * Tensors must be contiguous and stay alive, unmodified (inputs) and
//    untouched (outputs), until the Work completes.
//  * A failed or timed-out collective throws CommError from Work::wait();
//    the message names the operation, the tag given in CollectiveOptions (e.g.
//    "unit 'h.3'"), the group's global ranks and this rank. After a failure
//    the communicator is aborted: every later call fails at once with the
//    first error.
//  * Backends refuse what they cannot do with a CommError that says
//    "backend X does not support Y".
//  * Work::wait(): on CPU backends the result is in memory when it returns.
//    (A GPU backend will instead order the caller's current stream after the
//    collective, without a host sync.)
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace shard {

enum class ReduceOp { kSum, kAvg };
const char* to_string(ReduceOp op);

// Error of a collective or of communicator set-up.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CollectiveOptions {
  // 0 = the communicator's default timeout (CommunicatorOptions::timeout).
  std::chrono::milliseconds timeout{0};
  // Free text naming what the collective is for; appears in errors.
  std::string tag;
};

class Work {
 public:
  virtual ~Work() = default;
  // Non-blocking.
  virtual bool is_completed() = 0;
  // Blocks until done; rethrows the collective's error as CommError.
  // Safe to call twice.
  virtual void wait() = 0;
  // nullptr while running or on success.
  virtual std::exception_ptr error() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

struct CommunicatorOptions {
  // Deadline of every collective unless CollectiveOptions overrides it, and
  // of connecting the group.
  std::chrono::milliseconds timeout{std::chrono::minutes(3)};
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;   // rank inside this group
  virtual int size() const = 0;   // group size
  // Global rank of every member, in group-rank order (for errors and tests).
  virtual const std::vector<int>& global_ranks() const = 0;
  virtual std::string backend_name() const = 0;

  // output = concat over group ranks r of rank r's input.
  // output.numel() == size() * input.numel(); same dtype. Any dtype (bytes
  // are moved as they are).
  virtual WorkPtr all_gather_into(at::Tensor output, at::Tensor input,
                                  const CollectiveOptions& opts = {}) = 0;

  // input is size() equal chunks; output (one chunk) = op over ranks of
  // chunk[rank()]. input.numel() == size() * output.numel(); same dtype.
  // float32/float64/bfloat16/float16; low-precision types accumulate in
  // float32. input is not modified.
  virtual WorkPtr reduce_scatter(at::Tensor output, at::Tensor input,
                                 ReduceOp op,
                                 const CollectiveOptions& opts = {}) = 0;

  // In place.
  virtual WorkPtr all_reduce(at::Tensor tensor, ReduceOp op,
                             const CollectiveOptions& opts = {}) = 0;

  // In place, from group rank `root`.
  virtual WorkPtr broadcast(at::Tensor tensor, int root,
                            const CollectiveOptions& opts = {}) = 0;

  virtual WorkPtr barrier(const CollectiveOptions& opts = {}) = 0;

  // Bytes moved by this rank (sent), for benchmarks and accounting.
  virtual uint64_t bytes_sent() const = 0;
};
using CommunicatorPtr = std::shared_ptr<Communicator>;

// "[0, 1, 3]": how errors print a group's ranks.
std::string format_ranks(const std::vector<int>& ranks);

// How every backend's errors name a collective: "<op> (tag: <tag>) on group
// '<group>' (global ranks [..]) at global rank G (group rank g)", with
// "(untagged)" for an empty tag.
std::string describe_collective(const char* op, const std::string& tag, const std::string& group,
                                const std::vector<int>& global_ranks, int group_rank);

// A Work that is already complete (used for size-1 groups and no-ops).
WorkPtr completed_work();

}  // namespace shard
