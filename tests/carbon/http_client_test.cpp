// carbon::make_http_client and the base URL it takes (carbon/http_client.h):
// what is refused, naming what is wrong, and a client that sends the bearer
// token and keeps to its read timeout against a loopback server.
#include "carbon/http_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <stdexcept>
#include <thread>

namespace carbon {
namespace {

TEST(HttpBaseUrl, HostAndPortWithTheSchemesDefault) {
  HttpEndpoint e = parse_http_base_url("http://ctl.example");
  EXPECT_EQ(e.host, "ctl.example");
  EXPECT_EQ(e.port, 80);
  e = parse_http_base_url("https://10.0.0.1");
  EXPECT_EQ(e.port, 443);
  e = parse_http_base_url("https://k8s-api_1.example:6443");
  EXPECT_EQ(e.host, "k8s-api_1.example");
  EXPECT_EQ(e.port, 6443);
  e = parse_http_base_url("http://[::1]:8080");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 8080);
}

TEST(HttpBaseUrl, AnythingElseIsRefusedNamingTheUrlAndWhatIsWrong) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c : {Case{"ftp://h", "is not an http:// or https:// URL"},
                        Case{"h:8080", "is not an http:// or https:// URL"},
                        Case{"http://", "has no host"},
                        Case{"http://:8080", "has no host"},
                        Case{"http://h:0", "has a bad port (1-65535)"},
                        Case{"http://h:65536", "has a bad port"},
                        Case{"http://h:", "has a bad port"},
                        Case{"http://h/api", "has a path, query or fragment"},
                        Case{"http://h:8080/", "has a path, query or fragment"},
                        Case{"http://h?x=1", "has a path, query or fragment"},
                        Case{"http://user@h", "has a bad character in its host name"},
                        Case{"http://[::1", "has an unclosed '['"},
                        Case{"http://[::g]", "has a bad IPv6 literal"}}) {
    try {
      parse_http_base_url(c.url);
      ADD_FAILURE() << c.url << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("'" + std::string(c.url) + "' " + c.why, 0), 0u) << what;
      EXPECT_NE(what.find("(expected http[s]://HOST[:PORT]"), std::string::npos) << what;
    }
  }
}

TEST(HttpUrl, SplitsIntoTheBaseAndThePathAndChecksTheBase) {
  struct Case {
    const char* url;
    const char* base;
    const char* path;
  };
  for (const Case& c : {Case{"http://h:8080/v1/jobs/j1/status", "http://h:8080", "/v1/jobs/j1/status"},
                        Case{"https://h", "https://h", ""},
                        Case{"https://h/", "https://h", "/"},
                        Case{"http://[::1]:9/a?b=1", "http://[::1]:9", "/a?b=1"}}) {
    const HttpUrl u = split_http_url(c.url);
    EXPECT_EQ(u.base, c.base) << c.url;
    EXPECT_EQ(u.path, c.path) << c.url;
  }
  // The base is checked as parse_http_base_url checks it, naming it.
  for (const char* bad : {"ftp://h/x", "controller:8080/v1", "http:///x", "http://h:0/x", "http://h?x=1", "http://u@h/x"})
    EXPECT_THROW(split_http_url(bad), std::invalid_argument) << bad;
}

TEST(HttpClient, ABadBaseUrlIsRefusedBeforeAnyRequest) {
  HttpClientOptions o;
  o.base_url = "https://h:6443/k8s/clusters/c-1";
  EXPECT_THROW(make_http_client(o), std::invalid_argument);
}

// A loopback server answering GET /who with the request's Authorization
// header, after `delay`.
struct EchoServer {
  httplib::Server svr;
  std::thread t;
  int port = 0;
  explicit EchoServer(std::chrono::milliseconds delay = {}) {
    svr.Get("/who", [delay](const httplib::Request& req, httplib::Response& res) {
      std::this_thread::sleep_for(delay);
      res.set_content(req.get_header_value("Authorization"), "text/plain");
    });
    port = svr.bind_to_any_port("127.0.0.1");
    t = std::thread([this] { svr.listen_after_bind(); });
    while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // stop() needs it
  }
  ~EchoServer() {
    svr.stop();
    t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

TEST(HttpClient, SendsTheBearerTokenWithEveryRequest) {
  EchoServer server;
  HttpClientOptions o;
  o.base_url = server.url();
  o.bearer_token = "t0ken";
  auto client = make_http_client(o);
  for (int i = 0; i < 2; ++i) {
    auto r = client.Get("/who");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->body, "Bearer t0ken");
  }
  o.bearer_token.clear();
  auto anonymous = make_http_client(o).Get("/who");
  ASSERT_TRUE(anonymous) << httplib::to_string(anonymous.error());
  EXPECT_EQ(anonymous->body, "");
}

TEST(HttpClient, KeepsToItsReadTimeout) {
  EchoServer slow(std::chrono::milliseconds(1500));
  HttpClientOptions o;
  o.base_url = slow.url();
  o.read_timeout = std::chrono::milliseconds(200);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = make_http_client(o).Get("/who");
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), httplib::Error::Read);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1200));
}

}  // namespace
}  // namespace carbon
