// Backend-independent pieces of the communicator interface.
#include "shard/communicator.h"

#include <sstream>

namespace shard {

const char* to_string(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "avg"; }

std::string format_ranks(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
  return os.str();
}

std::string describe_collective(const char* op, const std::string& tag, const std::string& group,
                                const std::vector<int>& global_ranks, int group_rank) {
  std::ostringstream os;
  os << op << (tag.empty() ? " (untagged)" : " (tag: " + tag + ")") << " on group '" << group
     << "' (global ranks " << format_ranks(global_ranks) << ") at global rank " << global_ranks[group_rank]
     << " (group rank " << group_rank << ")";
  return os.str();
}

namespace {

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
  std::exception_ptr error() override { return nullptr; }
};

}  // namespace

WorkPtr completed_work() {
  // Stateless, so one shared instance serves every caller.
  static const WorkPtr work = std::make_shared<CompletedWork>();
  return work;
}

}  // namespace shard
