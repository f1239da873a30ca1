#include "shard/host_memory.h"

#include <malloc.h>

// A sanitizer build's allocator is the sanitizer's own: glibc's mallinfo2
// sees none of it, and the runtime counts the bytes the program asked for.
// (The runtimes export the call; g++ ships no header declaring it.)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <cstddef>
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#define GS_SANITIZER_ALLOCATOR 1
#endif

#include <fstream>
#include <string>

namespace shard {

HostMemory host_memory() {
  HostMemory m;
#ifdef GS_SANITIZER_ALLOCATOR
  m.heap_in_use_bytes = static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  struct mallinfo2 mi = mallinfo2();
  m.heap_in_use_bytes = static_cast<int64_t>(mi.uordblks + mi.hblkhd);
#endif
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
