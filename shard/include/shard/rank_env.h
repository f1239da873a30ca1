// The torchrun environment of one rank: its six variables, written in one
// place (rank_env below: shard's launcher, the controller's local executor,
// the tests' rank spawner) and read in one (rendezvous_info_from_env,
// shard/rendezvous.h). No LibTorch here: the controller reaches this header
// through the contract library (worker/spec/shard_vocabulary.h).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace shard {

// Where one rank sits in its gang.
struct RendezvousInfo {
  std::string master_addr;
  int master_port = 0;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
};

inline constexpr const char* kMasterAddrVar = "MASTER_ADDR";
inline constexpr const char* kMasterPortVar = "MASTER_PORT";
inline constexpr const char* kRankVar = "RANK";
inline constexpr const char* kWorldSizeVar = "WORLD_SIZE";
inline constexpr const char* kLocalRankVar = "LOCAL_RANK";
inline constexpr const char* kLocalWorldSizeVar = "LOCAL_WORLD_SIZE";
inline constexpr std::array<const char*, 6> kRankEnvVars = {
    kMasterAddrVar, kMasterPortVar, kRankVar, kWorldSizeVar, kLocalRankVar, kLocalWorldSizeVar};

// The variables for `info`, in kRankEnvVars' order. No check here: the
// reader validates (validate(), shard/rendezvous.h).
inline std::vector<std::pair<std::string, std::string>> rank_env(const RendezvousInfo& info) {
  return {{kMasterAddrVar, info.master_addr},
          {kMasterPortVar, std::to_string(info.master_port)},
          {kRankVar, std::to_string(info.rank)},
          {kWorldSizeVar, std::to_string(info.world_size)},
          {kLocalRankVar, std::to_string(info.local_rank)},
          {kLocalWorldSizeVar, std::to_string(info.local_world_size)}};
}

}  // namespace shard
