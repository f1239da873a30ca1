// MemoryTracker: bytes of unsharded buffers now and at peak.
#pragma once

#include <algorithm>
#include <cstdint>

namespace shard {

struct MemoryTracker {
  int64_t current = 0;
  int64_t peak = 0;
  void add(int64_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
  }
  void sub(int64_t bytes) { current -= bytes; }
  void reset_peak() { peak = current; }
};

}  // namespace shard
