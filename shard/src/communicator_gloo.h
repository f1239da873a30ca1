// Internal: the Gloo (CPU, TCP) implementation of shard::Communicator.
//
// Built on Debian's libgloo directly (not c10d's ProcessGroupGloo): ring
// all-gather / reduce-scatter / all-reduce / broadcast over unbound buffers,
// pipelined in chunks, each communicator running its collectives in issue
// order on its own worker thread. Rendezvous (rendezvous.cpp) connects the
// gloo::Context; this header only wraps a connected one.
#pragma once

#include "group_spec.h"
#include "shard/communicator.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace gloo {
class Context;
}

namespace shard::detail {

struct GlooGroupSpec : GroupSpec {
  // Pipelining granularity of the ring algorithms (bytes per message).
  std::size_t chunk_bytes = std::size_t{1} << 20;
};

// Wraps a connected gloo context (context->rank == spec.rank, context->size ==
// spec.global_ranks.size()). `context` may be null for a one-member group,
// which then works as a local copy without a worker thread.
CommunicatorPtr make_gloo_communicator(GlooGroupSpec spec,
                                       std::shared_ptr<gloo::Context> context);

// The gloo context under a communicator made by make_gloo_communicator;
// nullptr for one-member groups and for other backends. For baselines
// (bench_collectives): only use it while none of the communicator's
// collectives is in flight, and in the same order on every member.
std::shared_ptr<gloo::Context> gloo_context_of(const Communicator& comm);

// True once a gloo communicator failed (aborted by an error); false for
// other backends.
bool gloo_is_aborted(const Communicator& comm);

}  // namespace shard::detail
