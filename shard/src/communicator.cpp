// Backend-independent pieces of the communicator interface.
#include "shard/communicator.h"

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
