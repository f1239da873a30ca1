// Host memory of this process, for memory goals and metrics (Linux).
#pragma once

#include <cstdint>

namespace shard {

struct HostMemory {
  int64_t heap_in_use_bytes = 0;  // malloc'ed and not yet freed (mallinfo2; a sanitizer build: its allocator's count)
  int64_t rss_bytes = 0;          // resident set now (VmRSS)
  int64_t peak_rss_bytes = 0;     // resident high-water mark (VmHWM)
};

HostMemory host_memory();

// Gives freed heap pages back to the OS (malloc_trim). glibc keeps freed
// blocks below its (adaptive) mmap threshold resident; building a model unit
// by unit calls this after each unit so its peak stays near one unit.
void release_free_heap();

}  // namespace shard
