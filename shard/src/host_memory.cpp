#include "shard/host_memory.h"

#include <malloc.h>

#include <fstream>
#include <string>

namespace shard {

HostMemory host_memory() {
  HostMemory m;
  struct mallinfo2 mi = mallinfo2();
  m.heap_in_use_bytes = static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    int64_t kb = 0;
    if (key == "VmRSS:" && status >> kb) m.rss_bytes = kb * 1024;
    else if (key == "VmHWM:" && status >> kb) m.peak_rss_bytes = kb * 1024;
    else status.ignore(1 << 20, '\n');
  }
  return m;
}

void release_free_heap() { ::malloc_trim(0); }

}  // namespace shard
