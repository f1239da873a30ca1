// Rendezvous: the torchrun environment -> a TCP store -> communicators.
//
// Variables (all required; shard/rank_env.h): MASTER_ADDR, MASTER_PORT,
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE. A missing, unparsable or inconsistent one is
// a std::invalid_argument whose message names the variable.
#pragma once

#include "shard/communicator.h"
#include "shard/rank_env.h"  // RendezvousInfo, the variables

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shard {

// getenv is injectable for tests; it returns nullptr for unset variables.
RendezvousInfo rendezvous_info_from_env(
    const std::function<const char*(const char*)>& getenv = nullptr);

// Checks ranges and consistency (rank < world_size, local_rank <
// local_world_size, world_size % local_world_size == 0, port 1..65535).
// Throws std::invalid_argument naming the variable.
void validate(const RendezvousInfo& info);

// Collective backend of a group: Gloo (CPU tensors, TCP) or NCCL (CUDA
// tensors; GREENSHARD_CUDA builds only).
enum class Backend { kGloo, kNccl };
const char* to_string(Backend backend);  // "gloo", "nccl"
// The backend for units computing on `compute_device`: NCCL for a CUDA
// device in a GREENSHARD_CUDA build, Gloo otherwise.
Backend backend_for(const c10::Device& compute_device);

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Rank 0 hosts the TCP store on MASTER_PORT; everybody connects. Blocks
  // until all ranks arrived or options.timeout passed (CommError naming the
  // ranks that did not arrive when it can).
  static std::shared_ptr<Rendezvous> connect(const RendezvousInfo& info,
                                             const CommunicatorOptions& options = {});

  virtual const RendezvousInfo& info() const = 0;
  int rank() const { return info().rank; }
  int world_size() const { return info().world_size; }

  // The group of all ranks (created on first use; every rank must call it).
  virtual CommunicatorPtr world() = 0;

  // A communicator over `ranks` (global ranks, ascending, unique). Only the
  // members call it, all with the same name and ranks; names must be unique
  // per rendezvous. Calling it twice with the same name returns the same
  // communicator. Throws std::invalid_argument when this rank is not a member
  // or the ranks are invalid.
  virtual CommunicatorPtr new_group(const std::string& name,
                                    const std::vector<int>& ranks) = 0;

  // The last call of a run, on every rank: returns once every rank of the
  // world has called it, so that a rank may exit. A barrier over a
  // communicator cannot serve: its sender returns while its last message may
  // still be in flight (a lost segment awaiting retransmission), and once it
  // exits, a peer's next segment to its closed socket draws a reset that
  // discards that message, failing the peer's barrier ("connection reset by
  // peer") after the whole run succeeded. depart() goes through the
  // rendezvous store instead, which rank 0 keeps up until every rank has left
  // (~Rendezvous). Throws CommError naming the ranks that did not call it
  // within options.timeout, or the lost store. Safe to call twice: the
  // second call returns at once.
  virtual void depart() = 0;

  // The same with an explicit backend (kGloo: exactly new_group(name,
  // ranks)). kNccl: one NCCL communicator on the current CUDA device, its
  // unique id exchanged through the rendezvous store; a build without
  // GREENSHARD_CUDA throws CommError. A name is bound to one backend.
  CommunicatorPtr new_group(const std::string& name, const std::vector<int>& ranks,
                            Backend backend);

 protected:
  // kNccl groups (new_group with a backend other than kGloo). The default
  // throws CommError ("backend nccl is not available in this build").
  virtual CommunicatorPtr new_group_with_backend(const std::string& name,
                                                 const std::vector<int>& ranks,
                                                 Backend backend);
};

}  // namespace shard
