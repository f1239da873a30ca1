#include "common/fifo_feed.h"

#include <fcntl.h>
#include <unistd.h>

namespace gstest {

std::thread feed_fifo(const std::string& path, const std::string& text, int64_t repeats) {
  return std::thread([path, &text, repeats] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    for (int64_t k = 0; k < repeats; ++k) {
      const char* p = text.data();
      size_t n = text.size();
      while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w <= 0) {
          ::close(fd);
          return;
        }
        p += w;
        n -= static_cast<size_t>(w);
      }
    }
    ::close(fd);
  });
}

}  // namespace gstest
