// Internal: the NCCL (CUDA) implementation of shard::Communicator.
// Built only with GREENSHARD_CUDA (and by the compile-only check target
// shard_nccl_compile_check). This header has no CUDA includes so that
// rendezvous.cpp can include it in every build.
//
// Semantics (see communicator_nccl.cpp for the details):
//  * One ncclComm per group; the unique id is made by group rank 0 and
//    exchanged through the rendezvous store (NcclStore below).
//  * Every collective of a communicator runs on its own dedicated stream,
//    shared with no other communicator (FSDP's /ag/ and /rs/ communicators
//    thus overlap all-gathers with reduce-scatters; see dedicated_stream).
//    A collective first waits (cudaStreamWaitEvent) for the caller's current
//    stream; Work::wait() makes the caller's current stream wait for the
//    collective. No host synchronization on that path.
//  * Errors: a watchdog thread per communicator polls ncclCommGetAsyncError
//    and every pending collective's deadline; on an error or a timeout it
//    aborts the communicator (ncclCommAbort) and fails every pending and
//    later collective with a CommError naming the operation, the tag, the
//    group's ranks and this rank (the Gloo backend's wording).
#pragma once

#include "group_spec.h"
#include "shard/communicator.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace shard::detail {

struct NcclGroupSpec : GroupSpec {
  int global_rank = 0;            // this process's global rank
  // CUDA device index of the communicator; -1 = the current device.
  int device = -1;
  // bf16/fp16 reductions: cast to fp32 on the collective's stream, reduce
  // in fp32, cast back (the Communicator contract: low precision
  // accumulates in fp32). false: NCCL reduces in the tensor's own dtype.
  bool low_precision_reduce_in_fp32 = true;
  // Work::wait() blocks the host until the collective finished (debugging;
  // GREENSHARD_NCCL_BLOCKING_WAIT=1). Default: stream-ordered wait.
  bool blocking_wait = false;
};

// The rendezvous store, under the group's key prefix.
struct NcclStore {
  std::function<void(const std::string& key, const std::vector<uint8_t>& value)> set;
  // Waits for `key` until the deadline; throws CommError on timeout.
  std::function<std::vector<uint8_t>(const std::string& key, std::chrono::milliseconds timeout)> get;
};

// Connects the group (collective over its members; bounded by
// spec.timeout). Throws CommError naming the group, its ranks and this rank.
CommunicatorPtr make_nccl_communicator(NcclGroupSpec spec, const NcclStore& store);

// True once an NCCL communicator failed (aborted); false for other backends.
bool nccl_is_aborted(const Communicator& comm);

// "2.28.9" (the NCCL library loaded at run time).
std::string nccl_runtime_version();

}  // namespace shard::detail
