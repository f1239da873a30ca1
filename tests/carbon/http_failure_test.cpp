// carbon::explain_http_failure (carbon/http_failure.h) on real failures
// against loopback sockets: nothing listening, a server that closes, one
// that never answers (plain and TLS), a plain server asked for TLS, a CA
// bundle that cannot be loaded, a host that does not resolve. (A
// certificate that does not verify: tests/controller/tls_test.cpp, through
// the CLI and the worker, with real certificates.)
#include "carbon/http_failure.h"

#include <gtest/gtest.h>

#include "common/loopback_socket.h"
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace carbon {
namespace {

using Kind = HttpFailure::Kind;

using gstest::LoopbackSocket;

// Accepts every connection and closes it: after reading the request's
// head (so the client has sent all of a GET and then reads the end of the
// stream), or at once without reading (so a client still sending a large
// body has its connection reset).
struct ClosingServer {
  LoopbackSocket sock{true};
  std::thread acceptor;
  explicit ClosingServer(bool read_head_first) {
    acceptor = std::thread([this, read_head_first] {
      for (int c; (c = ::accept4(sock.fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
        std::string head;
        char buf[4096];
        ssize_t n;
        while (read_head_first && head.find("\r\n\r\n") == std::string::npos && (n = ::read(c, buf, sizeof buf)) > 0)
          head.append(buf, size_t(n));
        ::close(c);
      }
    });
  }
  ~ClosingServer() {
    ::shutdown(sock.fd, SHUT_RDWR);  // wakes accept
    acceptor.join();
  }
};

// A GET / on a client of `o`, explained.
HttpFailure get_fails(const HttpClientOptions& o) {
  auto client = make_http_client(o);
  const auto sent = std::chrono::steady_clock::now();
  auto r = client.Get("/");
  if (r) throw std::runtime_error("answered HTTP " + std::to_string(r->status));
  return explain_http_failure(r, client, o, sent);
}

HttpClientOptions options(const std::string& url) {
  HttpClientOptions o;
  o.base_url = url;
  o.connect_timeout = std::chrono::milliseconds(500);
  o.read_timeout = std::chrono::milliseconds(300);
  return o;
}

TEST(HttpFailure, NothingListeningIsARefusedConnectNamingHostAndPort) {
  LoopbackSocket bound(false);
  const HttpFailure f = get_fails(options(bound.url()));
  EXPECT_EQ(f.kind, Kind::kRefused);
  EXPECT_EQ(f.cause, "cannot reach " + bound.url() + ": connection refused: nothing listens at 127.0.0.1:" +
                         std::to_string(bound.port));
}

TEST(HttpFailure, AServerThatClosesWithoutAnAnswer) {
  ClosingServer closing(/*read_head_first=*/true);
  const HttpFailure f = get_fails(options(closing.sock.url()));
  EXPECT_EQ(f.kind, Kind::kClosed);
  EXPECT_EQ(f.cause, closing.sock.url() + " closed the connection without an answer");
}

TEST(HttpFailure, AServerThatClosesBeforeItTookTheRequest) {
  // 64 MiB cannot fit in loopback socket buffers that nobody reads: the
  // close always comes while the body is still being sent. (Which of the
  // two a closing server hits first depends on when it closes: a GET to a
  // server that closes at once may fail either way; both are kClosed.)
  ClosingServer closing(/*read_head_first=*/false);
  HttpClientOptions o = options(closing.sock.url());
  o.write_timeout = std::chrono::seconds(60);
  auto client = make_http_client(o);
  const auto sent = std::chrono::steady_clock::now();
  auto r = client.Post("/", std::string(64 << 20, 'x'), "application/octet-stream");
  ASSERT_FALSE(r) << "answered HTTP " << r->status;
  const HttpFailure f = explain_http_failure(r, client, o, sent);
  EXPECT_EQ(f.kind, Kind::kClosed);
  EXPECT_EQ(f.cause, closing.sock.url() + " closed the connection before it took the request");
}

TEST(HttpFailure, NoAnswerWithinTheReadTimeoutNamesItAndWhereItCameFrom) {
  LoopbackSocket silent(true);
  HttpFailure f = get_fails(options(silent.url()));
  EXPECT_EQ(f.kind, Kind::kTimeout);
  EXPECT_EQ(f.cause, "timeout: " + silent.url() + " accepted the connection but sent no answer within 0.3 s");
  // Over TLS, the handshake is what never ends.
  HttpClientOptions tls = options(silent.url("https"));
  tls.read_timeout_origin = "--timeout";
  f = get_fails(tls);
  EXPECT_EQ(f.kind, Kind::kTimeout);
  EXPECT_EQ(f.cause, "timeout: " + silent.url("https") +
                         " accepted the connection but did not complete the TLS handshake within --timeout 0.3 s");
}

TEST(HttpFailure, TlsToAPlainServerIsAFailedHandshake) {
  httplib::Server plain;
  plain.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content("hi", "text/plain"); });
  const int port = plain.bind_to_any_port("127.0.0.1");
  std::thread t([&] { plain.listen_after_bind(); });
  while (!plain.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  HttpClientOptions o = options(url);
  o.read_timeout = std::chrono::seconds(5);
  const HttpFailure f = get_fails(o);
  plain.stop();
  t.join();
  EXPECT_EQ(f.kind, Kind::kHandshake);
  EXPECT_EQ(f.cause, "TLS: handshake with " + url + " failed: it does not speak TLS there");
}

TEST(HttpFailure, ACaBundleThatCannotBeLoadedIsNamedAsItsCallerNamesIt) {
  LoopbackSocket silent(true);
  HttpClientOptions o = options(silent.url("https"));
  o.ca_bundle = "/nonexistent/ca.pem";
  HttpFailure f = get_fails(o);
  EXPECT_EQ(f.kind, Kind::kCaBundle);
  EXPECT_EQ(f.cause, "TLS: cannot load the CA bundle '/nonexistent/ca.pem' to verify " + silent.url("https"));
  o.ca_bundle_variable = "GREENSHARD_CA_BUNDLE";
  f = get_fails(o);
  EXPECT_EQ(f.cause, "TLS: cannot load GREENSHARD_CA_BUNDLE=/nonexistent/ca.pem to verify " + silent.url("https"));
}

TEST(HttpFailure, AnUnknownHostIsNamed) {
  // .invalid never resolves (RFC 2606); without a resolver the lookup fails too.
  const HttpFailure f = get_fails(options("http://no-such-host.invalid:1"));
  EXPECT_EQ(f.kind, Kind::kOther);
  EXPECT_EQ(f.cause.rfind("cannot reach http://no-such-host.invalid:1: unknown host 'no-such-host.invalid': ", 0), 0u)
      << f.cause;
}

}  // namespace
}  // namespace carbon
