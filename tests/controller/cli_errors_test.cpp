// The greenshard CLI as a real process against what is not a working
// controller: each failure is one line naming its cause and the flag that
// fixes it, with the CLI's exit code (2 usage, 3 cannot reach), and a failed
// `list` prints no table. Only loopback is contacted (and the resolver, for
// a name under the reserved .invalid TLD).
#include <gtest/gtest.h>

#include "common/loopback_socket.h"
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/spawn.h"

namespace {

gstest::RankResult cli(const std::string& server, std::vector<std::string> args,
                       std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {CLI_BIN};
  if (!server.empty()) {
    argv.push_back("--server");
    argv.push_back(server);
  }
  argv.push_back("--token");
  argv.push_back("user-token-team-a-0001");
  for (auto& a : args) argv.push_back(a);
  env["HOME"] = "/nonexistent";  // no config file
  return gstest::run_process(argv, env, std::chrono::seconds(120));
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The error lines of an output ("greenshard: ..."), counted.
int error_lines(const std::string& out) {
  int n = 0;
  for (size_t p = out.find("greenshard: "); p != std::string::npos; p = out.find("greenshard: ", p + 1)) ++n;
  return n;
}

using gstest::LoopbackSocket;

// A server that accepts every connection (in a thread of the test) and
// never answers; the connections close when it is destroyed.
struct SilentServer {
  LoopbackSocket sock{true};
  std::vector<int> conns;
  std::thread acceptor;
  SilentServer() {
    acceptor = std::thread([this] {
      for (;;) {
        const int c = ::accept4(sock.fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        conns.push_back(c);
      }
    });
  }
  ~SilentServer() {
    ::shutdown(sock.fd, SHUT_RDWR);  // wakes accept
    acceptor.join();
    for (int c : conns) ::close(c);
  }
};

// A loopback HTTP server that is no GreenShard controller: every GET is
// answered `status` with an HTML page.
struct HtmlServer {
  httplib::Server svr;
  std::thread t;
  int port = 0;
  explicit HtmlServer(int status) {
    svr.Get(".*", [status](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content("<html><body>It works!</body></html>", "text/html");
    });
    port = svr.bind_to_any_port("127.0.0.1");  // listening from here on: connections queue
    t = std::thread([this] { svr.listen_after_bind(); });
  }
  ~HtmlServer() {
    svr.stop();
    t.join();
  }
  std::string url(const char* scheme = "http") const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port);
  }
};

}  // namespace

TEST(CliErrors, ConnectionRefusedNamesTheServerFlagAndPrintsNoTable) {
  LoopbackSocket bound(false);  // bound, not listening: connect is refused
  auto r = cli(bound.url(), {"list"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard: cannot reach " + bound.url() + ": connection refused: nothing listens at "
                                "127.0.0.1:" + std::to_string(bound.port) +
                                " (is the controller running? check --server)"))
      << r.output;
  EXPECT_FALSE(has(r.output, "GCO2E")) << "a failed list printed a table:\n" << r.output;
  EXPECT_FALSE(has(r.output, "NAME")) << r.output;
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
}

TEST(CliErrors, RefusedServerFromTheEnvironmentNamesTheVariable) {
  LoopbackSocket bound(false);
  auto r = cli("", {"get", "abc"}, {{"GREENSHARD_SERVER", bound.url()}});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "connection refused")) << r.output;
  EXPECT_TRUE(has(r.output, "check --server (from GREENSHARD_SERVER)")) << r.output;
}

TEST(CliErrors, UnknownHostIsNamed) {
  // .invalid never resolves (RFC 2606); without a resolver the lookup fails too.
  auto r = cli("http://no-such-host.invalid:1", {"list"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard: cannot reach http://no-such-host.invalid:1: unknown host "
                            "'no-such-host.invalid': "))
      << r.output;
  EXPECT_TRUE(has(r.output, "(check --server)")) << r.output;
  EXPECT_FALSE(has(r.output, "GCO2E")) << r.output;
}

TEST(CliErrors, BadUrlIsUsageNamingTheFlag) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c : {Case{"ftp://127.0.0.1:1", "is not an http:// or https:// URL"},
                        Case{"127.0.0.1:8080", "is not an http:// or https:// URL"},
                        Case{"http://", "is not an http:// or https:// URL"},
                        Case{"http://:8080", "has no host"},
                        Case{"http://127.0.0.1:0", "has a bad port"},
                        Case{"http://127.0.0.1:65536", "has a bad port"},
                        Case{"http://127.0.0.1:80x", "has a bad port"},
                        Case{"http://127.0.0.1:8080/api", "has a path"},
                        Case{"http://a b:8080", "has a bad character in its host name"},
                        Case{"http://user@127.0.0.1:8080", "has a bad character in its host name"},
                        Case{"http://[::1:8080", "unclosed '['"}}) {
    auto r = cli(c.url, {"list"});
    EXPECT_EQ(r.exit_code, 2) << c.url << ": " << r.output;
    EXPECT_TRUE(has(r.output, "greenshard: --server: '")) << c.url << ": " << r.output;
    EXPECT_TRUE(has(r.output, c.why)) << c.url << ": " << r.output;
    EXPECT_FALSE(has(r.output, "GCO2E")) << r.output;
  }
  auto env = cli("", {"list"}, {{"GREENSHARD_SERVER", "gopher://127.0.0.1:1"}});
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_TRUE(has(env.output, "--server (from GREENSHARD_SERVER): 'gopher://127.0.0.1:1'")) << env.output;
}

TEST(CliErrors, SilentServerTimesOutNamingTheTimeoutFlag) {
  SilentServer silent;
  auto r = cli(silent.sock.url(), {"--timeout", "0.5", "list"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard: timeout: " + silent.sock.url() +
                                " accepted the connection but sent no answer within --timeout 0.5 s (raise "
                                "--timeout, or check --server)"))
      << r.output;
  EXPECT_FALSE(has(r.output, "GCO2E")) << r.output;
  // The same over https://: the handshake is what never ends.
  auto tls = cli(silent.sock.url("https"), {"--timeout", "0.5", "get", "abc"});
  EXPECT_EQ(tls.exit_code, 3) << tls.output;
  EXPECT_TRUE(has(tls.output, "did not complete the TLS handshake within --timeout 0.5 s")) << tls.output;
  // A bad timeout is usage.
  auto bad = cli(silent.sock.url(), {"--timeout", "0", "list"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(has(bad.output, "--timeout")) << bad.output;
}

TEST(CliErrors, HtmlServerIsNotAGreenShardController) {
  HtmlServer html(200);
  auto r = cli(html.url(), {"list"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard: " + html.url() + " is not a GreenShard controller: /v1/jobs answered "
                                "HTTP 200 (text/html), not its JSON (check --server)"))
      << r.output;
  EXPECT_FALSE(has(r.output, "GCO2E")) << "a failed list printed a table:\n" << r.output;
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  for (const char* cmd : {"regions", "get"}) {
    std::vector<std::string> args = {cmd};
    if (std::string(cmd) == "get") args.push_back("abc");
    auto o = cli(html.url(), args);
    EXPECT_EQ(o.exit_code, 3) << cmd << ": " << o.output;
    EXPECT_TRUE(has(o.output, "is not a GreenShard controller")) << cmd << ": " << o.output;
  }
  // An error page that is not the controller's error shape: the same cause,
  // not "not found" (exit 5).
  HtmlServer missing(404);
  auto g = cli(missing.url(), {"get", "abc"});
  EXPECT_EQ(g.exit_code, 3) << g.output;
  EXPECT_TRUE(has(g.output, "/v1/jobs/abc answered HTTP 404 (text/html)")) << g.output;
}

TEST(CliErrors, HttpsToAPlainHttpServerIsATlsFailure) {
  HtmlServer plain(200);
  auto r = cli(plain.url("https"), {"list"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard: TLS: handshake with " + plain.url("https") +
                                " failed: it does not speak TLS there (is it an http:// server? check --server)"))
      << r.output;
  EXPECT_FALSE(has(r.output, "GCO2E")) << r.output;
}
