// A TCP socket bound to 127.0.0.1 on a port the kernel picks; listening
// when asked (connections then queue: a server that never answers). Closed
// by the destructor. For tests of clients against refusing, silent or
// closing servers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace gstest {

struct LoopbackSocket {
  int fd = -1, port = 0;
  explicit LoopbackSocket(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        (listening && ::listen(fd, 16) != 0) || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd >= 0) ::close(fd);
      throw std::runtime_error("gstest: loopback socket");
    }
    port = ntohs(a.sin_port);
  }
  LoopbackSocket(const LoopbackSocket&) = delete;
  LoopbackSocket& operator=(const LoopbackSocket&) = delete;
  ~LoopbackSocket() {
    if (fd >= 0) ::close(fd);
  }
  std::string url(const char* scheme = "http") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port);
  }
};

}  // namespace gstest
