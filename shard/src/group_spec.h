// What every backend's communicator knows of its group: the part of
// GlooGroupSpec and NcclGroupSpec the rendezvous fills the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace shard::detail {

struct GroupSpec {
  std::string name;               // group name, appears in errors
  std::vector<int> global_ranks;  // members in group-rank order
  int rank = 0;                   // this process's rank inside the group
  // Default deadline of every collective (CollectiveOptions::timeout = 0)
  // and, for NCCL, of connecting the group.
  std::chrono::milliseconds timeout{std::chrono::minutes(3)};
};

// The group `name` of `global_ranks` (ascending) seen from `global_rank`, a member.
inline GroupSpec group_spec(const std::string& name, const std::vector<int>& global_ranks, int global_rank,
                            std::chrono::milliseconds timeout) {
  GroupSpec s;
  s.name = name;
  s.global_ranks = global_ranks;
  s.rank = static_cast<int>(std::lower_bound(global_ranks.begin(), global_ranks.end(), global_rank) -
                            global_ranks.begin());
  s.timeout = timeout;
  return s;
}

}  // namespace shard::detail
