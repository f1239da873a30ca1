// Backend-independent pieces of the communicator interface.
#include "shard/communicator.h"

#include <sstream>

namespace shard {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  os << "]";
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
