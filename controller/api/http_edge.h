// The HTTP edge: every byte a client sends reaches the router only as a
// whole, checked request.
//
// One event thread (epoll) accepts connections and reads each request head
// and body under deadlines; an idle, silent or trickling client costs a
// file descriptor and a few bytes, never a thread. Only a complete request
// goes to a worker, through a bounded queue: when the queue is full the
// client gets 503 at once instead of waiting behind the others. Requests
// that stream for a long time (`logs?follow=true`) run on a pool of their
// own, so they cannot take the workers that answer submits and /healthz.
//
// The router is httplib's: routes are registered on an HttpRouter (an
// httplib::Server that never listens) and HttpRouter::process() runs one
// buffered request through its routing, error handler and logger. The same
// function serves the event loop and serve_bytes() (the whole-request fuzz
// target and tests), so the path a fuzzer drives is the path clients take.
//
// Contract of the edge (all limits in HttpEdgeOptions):
//   - a head larger than max_header_bytes: 431; one not complete within
//     header_timeout of its first byte (or of the connection, with TLS, its
//     handshake): 408, and the connection is closed;
//   - Content-Length that is not one non-negative decimal integer, two
//     different ones, or Content-Length with Transfer-Encoding: 400 naming
//     the header; a body over max_body_bytes: 413; a body not complete
//     within body_timeout of its head: 408; a Transfer-Encoding other than
//     chunked: 501;
//   - max_connections open at once: the next one is answered 503 and closed;
//     a full worker queue (or, for streams, every stream worker busy): 503
//     with Retry-After;
//   - a kept-alive connection silent for idle_timeout is closed, and one
//     serves at most max_requests_per_connection requests;
//   - each write of a response must progress within write_timeout, else the
//     connection is dropped.
// Every error the edge answers itself is the API's JSON error
// ({"error": {"code", "message", "field"}}) with Connection: close.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <httplib.h>

typedef struct ssl_ctx_st SSL_CTX;

namespace controller {

// Routes registered with the httplib::Server interface (Get, Post, ...,
// set_error_handler, set_logger); process() runs exactly one request read
// from `strm` and writes its response there. It never listens.
class HttpRouter : public httplib::Server {
 public:
  // httplib ends a chunked response early when its server socket is
  // invalid ("shutting down"); a router has none, so it holds a descriptor
  // of /dev/null there for its life.
  HttpRouter();
  ~HttpRouter() override;
  // true: the connection may carry another request (connection_closed says
  // whether the request asked to close it).
  bool process(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
    return process_request(strm, close_connection, connection_closed, nullptr);
  }
};

struct HttpEdgeOptions {
  int workers = 16;         // threads answering ordinary requests
  int stream_workers = 8;   // threads for long streams (is_stream); each holds one
  size_t max_queue = 256;   // complete requests waiting for a worker; beyond: 503
  size_t max_connections = 4096;  // open at once (also capped by RLIMIT_NOFILE)
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 256 * 1024;
  size_t max_requests_per_connection = 1000;
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds write_timeout{10000};
  // HTTPS when set (owned by the caller, outlives the edge): the handshake
  // runs on the event thread under header_timeout.
  SSL_CTX* tls = nullptr;
  // Which requests are long streams (method, request target as sent).
  std::function<bool(std::string_view method, std::string_view target)> is_stream;
  // Each response the edge writes itself (status), for metrics.
  std::function<void(int status)> on_edge_response;
};

// Where one request ends in the bytes a connection has sent so far.
struct RequestFrame {
  enum class Status { kIncomplete, kComplete, kBad };
  Status status = Status::kIncomplete;
  size_t head_bytes = 0;   // through the blank line; 0 while the head is incomplete
  size_t total_bytes = 0;  // head + body (kComplete)
  bool expect_continue = false;  // Expect: 100-continue (the edge answers it)
  std::string method, target;
  // kBad: what the edge answers.
  int error_status = 0;
  std::string error_code, error_message, error_field;
};
RequestFrame frame_request(std::string_view bytes, const HttpEdgeOptions& limits);

// Runs `bytes` as everything one connection sent (then closed): frames each
// request as the edge does, answers the edge's errors, and runs complete
// requests through the router. Returns every byte written back.
std::string serve_bytes(HttpRouter& router, std::string_view bytes, const HttpEdgeOptions& limits);

class HttpEdge {
 public:
  HttpEdge(HttpRouter& router, HttpEdgeOptions options);
  ~HttpEdge();  // stop(), then waits for the threads
  HttpEdge(const HttpEdge&) = delete;
  HttpEdge& operator=(const HttpEdge&) = delete;

  // Binds host:port (0 = any free port) and listens; returns the port.
  // Throws std::runtime_error naming the address when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop(); blocks. Returns at once if stop() came first.
  void serve();
  // Safe to call twice, from any thread (not from a signal handler).
  // Streams in flight see is_writable() turn false and end.
  void stop();

  struct Stats {
    uint64_t accepted = 0, open = 0, served = 0;
    uint64_t rejected_busy = 0;      // 503: queue full, stream pool full, connection cap
    uint64_t timed_out = 0;          // 408 and idle closes
    uint64_t bad_requests = 0;       // 4xx/5xx written by the edge itself, not 503
    uint64_t in_flight = 0;          // requests queued or running on the workers and streams
  };
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace controller
