#include "controller/api/http_edge.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "controller/core/api_types.h"

namespace controller {

namespace {

using SteadyClock = std::chrono::steady_clock;
using nlohmann::json;

constexpr size_t kMaxTarget = 8192;         // request-target bytes (httplib's own limit)
constexpr size_t kMaxHeaderCount = 100;
constexpr size_t kMaxChunkLine = 1024;      // a chunk-size line with its extensions
constexpr auto kDrainTime = std::chrono::milliseconds(1000);  // read after an error, before close

char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// The bytes of an error the edge answers itself: the API's JSON error,
// Connection: close (the edge closes after it).
std::string edge_response(int status, const std::string& code, const std::string& message,
                          const std::string& field) {
  const std::string body =
      ApiError(status, code, message, field).to_json().dump(-1, ' ', false, json::error_handler_t::replace);
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                  "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                  "\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  return r + "\r\n" + body;
}

std::string edge_response(const RequestFrame& f) {
  return edge_response(f.error_status, f.error_code, f.error_message, f.error_field);
}

// A decimal Content-Length: digits only, at most 18 of them.
std::optional<uint64_t> parse_length(std::string_view v) {
  if (v.empty() || v.size() > 18) return std::nullopt;
  uint64_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + uint64_t(c - '0');
  }
  return x;
}

// The request as the router reads it: without the blank lines before it,
// without Expect (the edge has answered 100-continue itself) and without
// Range (no resource here is served in parts: httplib would cut a JSON
// document at the range, or answer an empty 416).
std::string forwarded_request(std::string_view bytes, size_t start, const RequestFrame& f) {
  std::string out;
  out.reserve(f.total_bytes - start);
  std::string_view head = bytes.substr(start, f.head_bytes - start);
  size_t pos = 0;
  while (pos < head.size()) {
    size_t eol = head.find("\r\n", pos);
    size_t next = eol == std::string_view::npos ? head.size() : eol + 2;
    std::string_view line = head.substr(pos, next - pos);
    const bool dropped = (line.size() >= 7 && iequals(line.substr(0, 7), "expect:")) ||
                         (line.size() >= 6 && iequals(line.substr(0, 6), "range:"));
    if (!dropped) out.append(line);
    pos = next;
  }
  out.append(bytes.substr(f.head_bytes, f.total_bytes - f.head_bytes));
  return out;
}

// Where the request in `bytes` starts (blank lines before a request line
// are ignored, RFC 9112 section 2.2).
size_t request_start(std::string_view bytes) {
  size_t i = 0;
  while (i + 1 < bytes.size() && bytes[i] == '\r' && bytes[i + 1] == '\n') i += 2;
  return i;
}

// The request's input for httplib's reader, from a buffer; the response goes
// wherever the subclass writes.
class BufferedStream : public httplib::Stream {
 public:
  explicit BufferedStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

class MemoryStream : public BufferedStream {
 public:
  MemoryStream(std::string_view in, std::string& out) : BufferedStream(in), out_(out) {}
  bool is_writable() const override { return true; }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  socket_t socket() const override { return -1; }

 private:
  std::string& out_;
};

// A socket address as text and port (IPv4 or IPv6; "" and 0 otherwise).
void peer_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char host[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
    port = ntohs(s->sin6_port);
  }
  ip = host;
}

// Waits until fd is ready for `events` or the deadline passes.
bool wait_fd(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
    if (r > 0) return (p.revents & (POLLERR | POLLNVAL)) == 0 || (p.revents & events);
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

HttpRouter::HttpRouter() { svr_sock_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

HttpRouter::~HttpRouter() {
  const int fd = svr_sock_.exchange(INVALID_SOCKET);
  if (fd >= 0) ::close(fd);
}

RequestFrame frame_request(std::string_view bytes, const HttpEdgeOptions& L) {
  RequestFrame f;
  auto bad = [&f](int status, std::string code, std::string message, std::string field = "") {
    f.status = RequestFrame::Status::kBad;
    f.error_status = status;
    f.error_code = std::move(code);
    f.error_message = std::move(message);
    f.error_field = std::move(field);
    return f;
  };
  const size_t start = request_start(bytes);
  const std::string_view b = bytes.substr(start);

  // The request line, as soon as it is complete (a garbage line is refused
  // without waiting for the rest).
  const size_t line_end = b.find("\r\n");
  if (line_end == std::string_view::npos) {
    if (b.size() > kMaxTarget + 32) return bad(414, "uri_too_long", "the request line is longer than 8 KiB");
    if (b.find('\n') != std::string_view::npos)
      return bad(400, "bad_request", "malformed HTTP request: lines must end with CRLF");
    return f;
  }
  const std::string_view line = b.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos)
    return bad(400, "bad_request", "malformed HTTP request line");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (method.empty() || method.size() > 16 ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return bad(400, "bad_request", "malformed HTTP request line: bad method");
  if (target.size() > kMaxTarget) return bad(414, "uri_too_long", "the request target is longer than 8 KiB");
  if (target.empty() ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
    return bad(400, "bad_request", "malformed HTTP request line: the target must be printable ASCII (percent-encode the rest)");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return bad(400, "bad_request", "malformed HTTP request line: HTTP/1.0 or HTTP/1.1 only");
  f.method = std::string(method);
  f.target = std::string(target);

  const size_t head_end = b.find("\r\n\r\n");
  if (head_end == std::string_view::npos) {
    if (b.size() > L.max_header_bytes)
      return bad(431, "header_too_large",
                 "the request head is larger than " + std::to_string(L.max_header_bytes / 1024) + " KiB");
    return f;
  }
  if (head_end + 4 > L.max_header_bytes)
    return bad(431, "header_too_large",
               "the request head is larger than " + std::to_string(L.max_header_bytes / 1024) + " KiB");
  f.head_bytes = start + head_end + 4;

  std::optional<uint64_t> length;
  bool chunked = false, has_te = false;
  size_t count = 0;
  for (size_t pos = line_end + 2; pos < head_end + 2;) {
    const size_t eol = b.find("\r\n", pos);
    const std::string_view h = b.substr(pos, eol - pos);
    pos = eol + 2;
    if (++count > kMaxHeaderCount)
      return bad(431, "header_too_large", "more than " + std::to_string(kMaxHeaderCount) + " header fields");
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return bad(400, "bad_request", "malformed header field (no name or no colon)");
    const std::string_view name = h.substr(0, colon), value = trim(h.substr(colon + 1));
    if (!std::all_of(name.begin(), name.end(), is_tchar))
      return bad(400, "bad_request", "malformed header field name");
    if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; }))
      return bad(400, "bad_request", "malformed header field value", std::string(name));
    if (iequals(name, "Content-Length")) {
      auto n = parse_length(value);
      if (!n)
        return bad(400, "invalid_header", "Content-Length: expected one non-negative decimal integer", "Content-Length");
      if (length && *length != *n)
        return bad(400, "invalid_header", "Content-Length: given twice with different values", "Content-Length");
      length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      has_te = true;
      if (!iequals(value, "chunked"))
        return bad(501, "not_implemented", "Transfer-Encoding: only chunked is supported", "Transfer-Encoding");
      chunked = true;
    } else if (iequals(name, "Expect")) {
      if (iequals(value, "100-continue")) f.expect_continue = true;
    }
  }
  if (has_te && length)
    return bad(400, "invalid_header", "Content-Length and Transfer-Encoding together", "Content-Length");
  const std::string too_large = "the request body is larger than " + std::to_string(L.max_body_bytes) + " bytes";
  if (length) {
    if (*length > L.max_body_bytes) return bad(413, "payload_too_large", too_large);
    if (bytes.size() - f.head_bytes < *length) return f;
    f.total_bytes = f.head_bytes + size_t(*length);
    f.status = RequestFrame::Status::kComplete;
    return f;
  }
  if (!chunked) {
    f.total_bytes = f.head_bytes;
    f.status = RequestFrame::Status::kComplete;
    return f;
  }
  // Chunked: size lines, data, CRLF, ..., a 0 chunk, trailer fields, CRLF.
  uint64_t body = 0;
  size_t pos = f.head_bytes;
  for (;;) {
    const size_t eol = bytes.find("\r\n", pos);
    if (eol == std::string_view::npos) {
      if (bytes.size() - pos > kMaxChunkLine) return bad(400, "bad_request", "malformed chunked body");
      return f;
    }
    std::string_view sz = bytes.substr(pos, eol - pos);
    if (size_t semi = sz.find(';'); semi != std::string_view::npos) sz = sz.substr(0, semi);
    sz = trim(sz);
    if (sz.empty() || sz.size() > 8 || !std::all_of(sz.begin(), sz.end(), [](char c) { return std::isxdigit(uint8_t(c)); }))
      return bad(400, "bad_request", "malformed chunked body: bad chunk size");
    const uint64_t n = std::stoull(std::string(sz), nullptr, 16);
    pos = eol + 2;
    if (n == 0) break;
    body += n;
    if (body > L.max_body_bytes) return bad(413, "payload_too_large", too_large);
    if (bytes.size() - pos < n + 2) return f;
    if (bytes.substr(pos + n, 2) != "\r\n") return bad(400, "bad_request", "malformed chunked body: no CRLF after a chunk");
    pos += n + 2;
  }
  for (size_t trailer = 0;;) {  // trailer fields, then the empty line
    const size_t eol = bytes.find("\r\n", pos);
    if (eol == std::string_view::npos) {
      if (bytes.size() - pos > L.max_header_bytes) return bad(431, "header_too_large", "chunked trailer too large");
      return f;
    }
    trailer += eol - pos + 2;
    if (trailer > L.max_header_bytes) return bad(431, "header_too_large", "chunked trailer too large");
    const bool last = eol == pos;
    pos = eol + 2;
    if (last) break;
  }
  f.total_bytes = pos;
  f.status = RequestFrame::Status::kComplete;
  return f;
}

std::string serve_bytes(HttpRouter& router, std::string_view bytes, const HttpEdgeOptions& limits) {
  std::string out;
  while (!bytes.empty()) {
    RequestFrame f = frame_request(bytes, limits);
    if (f.status == RequestFrame::Status::kBad) {
      out += edge_response(f);
      break;
    }
    if (f.status == RequestFrame::Status::kIncomplete) break;  // the client closed mid-request
    const std::string req = forwarded_request(bytes, request_start(bytes), f);
    bytes.remove_prefix(f.total_bytes);
    MemoryStream s(req, out);
    bool closed = false;
    if (!router.process(s, bytes.empty(), closed) || closed) break;
  }
  return out;
}

// ---------------------------------------------------------------------------
// The event loop and the pools.

namespace {

// A fixed set of threads taking tasks from a queue; a task is taken only
// while the tasks queued or running stay within threads + max_queue, else
// try_push says false.
class BoundedPool {
 public:
  BoundedPool(int threads, size_t max_queue) : capacity_(size_t(threads) + max_queue) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  ~BoundedPool() { shutdown(); }
  bool try_push(std::function<void()> task) {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || tasks_.size() + busy_ >= capacity_) return false;
    tasks_.push_back(std::move(task));
    cv_.notify_one();
    return true;
  }
  size_t in_flight() {  // queued or running
    std::lock_guard<std::mutex> l(mu_);
    return tasks_.size() + busy_;
  }
  void shutdown() {  // runs what is queued, then joins; safe twice
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
      l.unlock();
      task();
      task = nullptr;  // what it held goes before the slot does
      l.lock();
      --busy_;
    }
  }
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t busy_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  std::string peer_ip;
  int peer_port = 0;
  std::string buf;               // received, not yet served
  SteadyClock::time_point since;       // accepted, or back from a worker (idle from then)
  SteadyClock::time_point started;     // first byte of the request in progress (or the TLS accept)
  SteadyClock::time_point head_done;   // its head complete
  bool in_request = false;       // bytes of a request (or a TLS handshake) in progress
  bool head_seen = false;
  bool continue_sent = false;
  bool peer_eof = false;
  bool want_write = false;       // TLS wants POLLOUT to go on
  bool draining = false;         // an error was sent: read and drop until EOF or drain_until
  SteadyClock::time_point drain_until;
  size_t served = 0;
  bool closing = false;          // a worker is done with it: the loop closes it
  void close_now() {
    if (ssl) SSL_free(ssl);
    ssl = nullptr;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  ~Conn() { close_now(); }
};

// A request's input from its buffer; the response to the connection, each
// write progressing within write_timeout.
class ConnStream : public BufferedStream {
 public:
  ConnStream(std::string_view in, Conn& c, std::chrono::milliseconds write_timeout, const std::atomic<bool>& stopping)
      : BufferedStream(in), c_(c), write_timeout_(write_timeout), stopping_(stopping) {}
  bool failed() const { return failed_; }
  bool is_writable() const override {
    if (failed_ || stopping_.load()) return false;
    pollfd p{c_.fd, short(POLLOUT | POLLRDHUP), 0};
    if (::poll(&p, 1, 0) < 0) return false;
    return (p.revents & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) == 0;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (failed_) return -1;
    const auto deadline = SteadyClock::now() + write_timeout_;
    size_t done = 0;
    while (done < size) {
      if (c_.ssl) {
        ERR_clear_error();
        int n = SSL_write(c_.ssl, ptr + done, int(std::min<size_t>(size - done, 1 << 20)));
        if (n > 0) {
          done += size_t(n);
          continue;
        }
        int e = SSL_get_error(c_.ssl, n);
        short ev = e == SSL_ERROR_WANT_WRITE ? POLLOUT : e == SSL_ERROR_WANT_READ ? POLLIN : 0;
        if (ev && wait_fd(c_.fd, ev, deadline)) continue;
      } else {
        ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL);
        if (n > 0) {
          done += size_t(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_fd(c_.fd, POLLOUT, deadline)) continue;
      }
      failed_ = true;
      return -1;
    }
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = c_.peer_ip, port = c_.peer_port; }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    ip.clear(), port = 0;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) peer_of(a, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  Conn& c_;
  std::chrono::milliseconds write_timeout_;
  const std::atomic<bool>& stopping_;
  bool failed_ = false;
};

}  // namespace

struct HttpEdge::Impl {
  HttpRouter& router;
  HttpEdgeOptions opt;
  int listen_fd = -1, ep = -1, wake_fd = -1, reserve_fd = -1;
  std::atomic<bool> stopping{false};
  std::mutex run_mu;
  bool serving = false;
  std::unordered_map<int, std::shared_ptr<Conn>> conns;  // owned by the loop (not at a worker)
  std::mutex back_mu;
  std::vector<std::shared_ptr<Conn>> back;  // returned by workers, for the loop to take
  std::unique_ptr<BoundedPool> workers, streams;
  std::atomic<uint64_t> accepted{0}, open{0}, served{0}, rejected_busy{0}, timed_out{0}, bad{0};

  Impl(HttpRouter& r, HttpEdgeOptions o) : router(r), opt(std::move(o)) {
    // A connection is a descriptor: let the process have as many as it may.
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
      if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
        ::getrlimit(RLIMIT_NOFILE, &rl);
      }
      if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128)
        opt.max_connections = std::min<size_t>(opt.max_connections, size_t(rl.rlim_cur) - 128);
    }
    ep = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ep < 0 || wake_fd < 0) throw std::runtime_error(std::string("HTTP edge: ") + std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd, &ev);
    workers = std::make_unique<BoundedPool>(std::max(1, opt.workers), opt.max_queue);
    streams = std::make_unique<BoundedPool>(std::max(1, opt.stream_workers), 0);
  }

  ~Impl() {
    workers->shutdown();
    streams->shutdown();
    conns.clear();
    back.clear();
    if (listen_fd >= 0) ::close(listen_fd);
    if (reserve_fd >= 0) ::close(reserve_fd);
    ::close(wake_fd);
    ::close(ep);
  }

  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof(one));
  }

  void edge_answered(int status) {
    if (status == 503) ++rejected_busy;
    else if (status == 408) ++timed_out;
    else ++bad;
    if (opt.on_edge_response) opt.on_edge_response(status);
  }

  void watch(Conn& c) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | (c.want_write ? uint32_t(EPOLLOUT) : 0u);
    ev.data.fd = c.fd;
    if (::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev) != 0) ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }

  void close_conn(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    conns.erase(it);  // ~Conn closes
    --open;
  }

  // Writes what the edge answers (best effort: it is small, the socket
  // buffer takes it), then half-closes and drops what the client still
  // sends for a moment, so that it reads the answer rather than a reset.
  void answer_and_close(Conn& c, const std::string& bytes, int status) {
    edge_answered(status);
    if (c.ssl) {
      ERR_clear_error();
      SSL_write(c.ssl, bytes.data(), int(bytes.size()));
    } else {
      [[maybe_unused]] auto n = ::send(c.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
    ::shutdown(c.fd, SHUT_WR);
    c.draining = true;
    c.drain_until = SteadyClock::now() + kDrainTime;
    c.buf.clear();
    c.want_write = false;
    watch(c);
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {
          // Out of descriptors: take the next one with the reserve and shut
          // it, so the listening socket does not stay readable forever.
          ::close(reserve_fd);
          int x = ::accept(listen_fd, nullptr, nullptr);
          if (x >= 0) ::close(x);
          reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          ++rejected_busy;
          continue;
        }
        return;  // EAGAIN, or an error the next readiness retries
      }
      ++accepted;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (open.load() >= opt.max_connections) {
        const std::string r = edge_response(503, "overloaded",
                                             "too many open connections (" + std::to_string(opt.max_connections) +
                                                 "); retry later", "");
        edge_answered(503);
        if (!opt.tls) [[maybe_unused]] auto n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      auto c = std::make_shared<Conn>();
      c->fd = fd;
      peer_of(addr, c->peer_ip, c->peer_port);
      c->since = c->started = SteadyClock::now();
      if (opt.tls) {
        c->ssl = SSL_new(opt.tls);
        if (!c->ssl) {
          ::close(fd);
          c->fd = -1;
          continue;
        }
        SSL_set_fd(c->ssl, fd);
        SSL_set_accept_state(c->ssl);
        SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        c->in_request = true;  // the handshake runs under header_timeout
      }
      ++open;
      conns[fd] = c;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
  }

  // Reads what the socket has; false when the connection is gone.
  // What the loop holds of one connection's unserved bytes at most.
  size_t read_cap() const { return opt.max_header_bytes + opt.max_body_bytes + 2 * kMaxChunkLine + 65536; }

  bool read_some(Conn& c) {
    char tmp[16384];
    const size_t cap = read_cap();
    c.want_write = false;
    while (c.buf.size() < cap || c.draining) {
      if (c.ssl) {
        ERR_clear_error();
        int n = SSL_read(c.ssl, tmp, sizeof(tmp));
        if (n > 0) {
          if (!c.draining) c.buf.append(tmp, size_t(n));
          continue;
        }
        int e = SSL_get_error(c.ssl, n);
        if (e == SSL_ERROR_WANT_READ) return true;
        if (e == SSL_ERROR_WANT_WRITE) {
          c.want_write = true;
          return true;
        }
        if (e == SSL_ERROR_ZERO_RETURN) {
          c.peer_eof = true;
          return true;
        }
        return false;  // handshake failure, reset
      }
      ssize_t n = ::recv(c.fd, tmp, sizeof(tmp), 0);
      if (n > 0) {
        if (!c.draining) c.buf.append(tmp, size_t(n));
        continue;
      }
      if (n == 0) {
        c.peer_eof = true;
        return true;
      }
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    return true;
  }

  void on_event(int fd) {
    auto it = conns.find(fd);
    if (it == conns.end()) return;
    std::shared_ptr<Conn> c = it->second;
    if (!read_some(*c)) return close_conn(fd);
    if (c->draining) {
      if (c->peer_eof) close_conn(fd);
      return;
    }
    if (c->ssl && !SSL_is_init_finished(c->ssl)) {
      if (c->peer_eof) return close_conn(fd);
      watch(*c);
      return;
    }
    on_bytes(c);
  }

  // Frames what the connection has sent; dispatches a complete request.
  void on_bytes(const std::shared_ptr<Conn>& c) {
    if (c->buf.empty()) {
      if (c->peer_eof) return close_conn(c->fd);
      if (c->ssl) c->in_request = false;  // handshake done, nothing sent yet
      watch(*c);
      return;
    }
    const auto now = SteadyClock::now();
    if (!c->in_request) {
      c->in_request = true;
      c->started = now;
    }
    RequestFrame f = frame_request(c->buf, opt);
    if (f.status == RequestFrame::Status::kBad) return answer_and_close(*c, edge_response(f), f.error_status);
    if (f.status == RequestFrame::Status::kIncomplete && c->buf.size() >= read_cap())
      // Only chunk framing can be this large around an allowed body.
      return answer_and_close(*c, edge_response(413, "payload_too_large", "the request is too large", ""), 413);
    if (f.status == RequestFrame::Status::kIncomplete) {
      if (f.head_bytes > 0 && !c->head_seen) {
        c->head_seen = true;
        c->head_done = now;
      }
      if (c->peer_eof) return close_conn(c->fd);  // the client gave up mid-request
      if (f.expect_continue && !c->continue_sent) {
        c->continue_sent = true;
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (c->ssl) SSL_write(c->ssl, kContinue, int(sizeof(kContinue) - 1));
        else [[maybe_unused]] auto n = ::send(c->fd, kContinue, sizeof(kContinue) - 1, MSG_NOSIGNAL);
      }
      watch(*c);
      return;
    }
    dispatch(c, f);
  }

  void dispatch(const std::shared_ptr<Conn>& c, const RequestFrame& f) {
    const bool stream = opt.is_stream && opt.is_stream(f.method, f.target);
    auto req = std::make_shared<std::string>(forwarded_request(c->buf, request_start(c->buf), f));
    c->buf.erase(0, f.total_bytes);
    c->in_request = c->head_seen = c->continue_sent = false;
    const int fd = c->fd;
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    auto task = [this, c, req] { run_request(c, *req); };
    if (!(stream ? streams : workers)->try_push(task)) {
      watch(*c);
      answer_and_close(*c, edge_response(503, "overloaded",
                                         stream ? "every log stream slot is taken; retry later"
                                                : "the controller is busy; retry later",
                                         ""),
                       503);
      return;
    }
    conns.erase(fd);  // the worker has it now
  }

  // On a worker: one request through the router, then the connection goes
  // back to the loop (or is closed).
  void run_request(const std::shared_ptr<Conn>& c, const std::string& req) {
    ConnStream s(req, *c, opt.write_timeout, stopping);
    const bool last = c->peer_eof || ++c->served >= opt.max_requests_per_connection || stopping.load();
    bool closed = false;
    const bool ok = router.process(s, last, closed);
    ++served;
    // Back to the loop either way: descriptors are accepted and closed on
    // the loop's thread only (a number closed here could be reused by the
    // loop's next accept while this thread's last write is not ordered
    // before it).
    c->closing = !ok || closed || last || s.failed();
    {
      std::lock_guard<std::mutex> l(back_mu);
      back.push_back(c);
    }
    wake();
  }

  void take_back() {
    std::vector<std::shared_ptr<Conn>> got;
    {
      std::lock_guard<std::mutex> l(back_mu);
      got.swap(back);
    }
    for (auto& c : got) {
      if (stopping.load() || c->closing) {
        c->close_now();
        --open;
        continue;
      }
      c->since = SteadyClock::now();
      conns[c->fd] = c;
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = c->fd;
      ::epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
      if (!c->buf.empty()) on_bytes(c);  // a pipelined request is already here
    }
  }

  void sweep() {
    const auto now = SteadyClock::now();
    std::vector<int> idle;
    std::vector<std::shared_ptr<Conn>> late;
    for (auto& [fd, c] : conns) {
      if (c->draining) {
        if (now >= c->drain_until) idle.push_back(fd);
      } else if (c->in_request) {
        const bool head_late = !c->head_seen && now - c->started > opt.header_timeout;
        const bool body_late = c->head_seen && now - c->head_done > opt.body_timeout;
        if (head_late || body_late) late.push_back(c);
      } else if (now - c->since > opt.idle_timeout) {
        idle.push_back(fd);
      }
    }
    for (int fd : idle) {
      if (!conns.at(fd)->draining) ++timed_out;
      close_conn(fd);
    }
    for (auto& c : late) {
      if (c->ssl && !SSL_is_init_finished(c->ssl)) {
        edge_answered(408);
        close_conn(c->fd);
        continue;
      }
      answer_and_close(*c, edge_response(408, "request_timeout",
                                         c->head_seen ? "the request body did not arrive in time"
                                                      : "the request head did not arrive in time",
                                         ""),
                       408);
    }
  }

  void loop() {
    epoll_event events[256];
    auto next_sweep = SteadyClock::now();
    while (!stopping.load()) {
      int n = ::epoll_wait(ep, events, 256, 100);
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) accept_all();
        else if (fd == wake_fd) {
          uint64_t x;
          [[maybe_unused]] auto r = ::read(wake_fd, &x, sizeof(x));
          take_back();
        } else on_event(fd);
      }
      if (SteadyClock::now() >= next_sweep) {
        sweep();
        next_sweep = SteadyClock::now() + std::chrono::milliseconds(100);
      }
    }
    ::epoll_ctl(ep, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
    open -= conns.size();
    conns.clear();
    workers->shutdown();  // in-flight requests end; streams see is_writable() false
    streams->shutdown();
    take_back();
  }
};

HttpEdge::HttpEdge(HttpRouter& router, HttpEdgeOptions options)
    : impl_(std::make_unique<Impl>(router, std::move(options))) {}

HttpEdge::~HttpEdge() { stop(); }

int HttpEdge::bind(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string where = host + ":" + std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    throw std::runtime_error("cannot listen on " + where + ": " + gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    why = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd < 0) throw std::runtime_error("cannot listen on " + where + ": " + why);
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string ip;
  int bound = 0;
  peer_of(a, ip, bound);
  impl_->listen_fd = fd;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(impl_->ep, EPOLL_CTL_ADD, fd, &ev);
  return bound;
}

void HttpEdge::serve() {
  {
    std::lock_guard<std::mutex> l(impl_->run_mu);
    if (impl_->stopping.load() || impl_->serving || impl_->listen_fd < 0) return;
    impl_->serving = true;
  }
  impl_->loop();
  std::lock_guard<std::mutex> l(impl_->run_mu);
  impl_->serving = false;
}

void HttpEdge::stop() {
  impl_->stopping = true;
  impl_->wake();
  // Wait for serve() to leave its loop (it may be on another thread).
  for (;;) {
    {
      std::lock_guard<std::mutex> l(impl_->run_mu);
      if (!impl_->serving) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

HttpEdge::Stats HttpEdge::stats() const {
  Stats s;
  s.accepted = impl_->accepted;
  s.open = impl_->open;
  s.served = impl_->served;
  s.rejected_busy = impl_->rejected_busy;
  s.timed_out = impl_->timed_out;
  s.bad_requests = impl_->bad;
  s.in_flight = impl_->workers->in_flight() + impl_->streams->in_flight();
  return s;
}

}  // namespace controller
