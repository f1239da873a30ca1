// A thread's name as `top -H`, gdb and /proc/<pid>/task/*/comm show it:
// the communicators' worker, monitor and watchdog threads.
#pragma once

#include <pthread.h>

#include <algorithm>

#include <string>
#include <thread>

namespace shard::detail {

// Names `t` `name`, cut to the 15 bytes Linux keeps.
inline void name_thread(std::thread& t, std::string name) {
  name.resize(std::min<size_t>(name.size(), 15));
  pthread_setname_np(t.native_handle(), name.c_str());
}

}  // namespace shard::detail
