// The HTTP edge (controller/api/http_edge.h): request framing as a table keyed
// by a sentence; the edge itself on real loopback sockets with a router of
// the test's (deadlines, the connection cap, the bounded queue, the stream
// pool, pipelining, 100-continue); and the real greenshard-controller
// process held by hundreds of idle and slowloris sockets and by log
// streams, while a normal client is still served.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/spawn.h"
#include "controller/api/http_edge.h"
#include "process.h"

using json = nlohmann::json;
using controller::HttpEdge;
using controller::HttpEdgeOptions;
using controller::HttpRouter;
using controller::RequestFrame;

namespace {

// ---------------------------------------------------------------------------
// Raw loopback sockets.

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    throw std::runtime_error("connect: " + std::string(std::strerror(errno)));
  }
  return fd;
}

void send_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send: " + std::string(std::strerror(errno)));
    done += size_t(n);
  }
}

// Everything the server sends until it closes (or `limit` passes: a hang
// detector, not a timing goal).
std::string read_until_close(int fd, std::chrono::seconds limit = std::chrono::seconds(30)) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;
    out.append(buf, size_t(n));
  }
  return out + "<still open>";
}

// Reads until `count` responses with Content-Length have arrived.
std::string read_responses(int fd, int count, std::chrono::seconds limit = std::chrono::seconds(30)) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  auto complete = [&] {
    size_t pos = 0;
    for (int i = 0; i < count; ++i) {
      size_t he = out.find("\r\n\r\n", pos);
      if (he == std::string::npos) return false;
      std::string head = out.substr(pos, he - pos);
      if (head.rfind("HTTP/1.1 100", 0) == 0) {  // an interim answer
        pos = he + 4;
        --i;
        continue;
      }
      size_t cl = head.find("Content-Length: ");
      size_t len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
      if (out.size() < he + 4 + len) return false;
      pos = he + 4 + len;
    }
    return true;
  };
  while (!complete() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(response.substr(9, 3));
}

json body_of(const std::string& response) {
  size_t he = response.find("\r\n\r\n");
  return json::parse(response.substr(he == std::string::npos ? response.size() : he + 4), nullptr, false);
}

// ---------------------------------------------------------------------------
// Framing: where a request ends, and what the edge refuses before routing.

struct FrameRow {
  const char* sentence;
  std::string bytes;
  RequestFrame::Status status;
  int error_status = 0;          // kBad
  const char* field = "";        // kBad: the field named
  size_t total = 0;              // kComplete: bytes taken (0: all of them)
};

const HttpEdgeOptions kLimits = [] {
  HttpEdgeOptions o;
  o.max_header_bytes = 1024;
  o.max_body_bytes = 100;
  return o;
}();

class Frame : public ::testing::TestWithParam<FrameRow> {};

TEST_P(Frame, IsFramedAsExpected) {
  const FrameRow& row = GetParam();
  RequestFrame f = controller::frame_request(row.bytes, kLimits);
  ASSERT_EQ(int(f.status), int(row.status)) << row.sentence << ": " << f.error_message;
  if (row.status == RequestFrame::Status::kBad) {
    EXPECT_EQ(f.error_status, row.error_status) << f.error_message;
    EXPECT_EQ(f.error_field, row.field) << f.error_message;
    EXPECT_FALSE(f.error_message.empty());
  }
  if (row.status == RequestFrame::Status::kComplete) {
    EXPECT_EQ(f.total_bytes, row.total ? row.total : row.bytes.size());
  }
}

const std::string kGet = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
using S = RequestFrame::Status;

INSTANTIATE_TEST_SUITE_P(
    Edge, Frame,
    ::testing::Values(
        FrameRow{"a GET with no body is complete at its blank line", kGet, S::kComplete},
        FrameRow{"a GET followed by the next request takes only its own bytes", kGet + kGet, S::kComplete, 0, "",
                 kGet.size()},
        FrameRow{"blank lines before the request line are skipped", "\r\n\r\n" + kGet, S::kComplete},
        FrameRow{"a head without its blank line is incomplete", "GET / HTTP/1.1\r\nHost: x\r\n", S::kIncomplete},
        FrameRow{"a body shorter than Content-Length is incomplete",
                 "POST /v1/jobs HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", S::kIncomplete},
        FrameRow{"a body of exactly Content-Length is complete",
                 "POST /v1/jobs HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", S::kComplete},
        FrameRow{"Content-Length -1 is a bad header, not a large body",
                 "POST /v1/jobs HTTP/1.1\r\nContent-Length: -1\r\n\r\n", S::kBad, 400, "Content-Length"},
        FrameRow{"Content-Length that is not a number is named",
                 "POST /v1/jobs HTTP/1.1\r\nContent-Length: 12abc\r\n\r\n", S::kBad, 400, "Content-Length"},
        FrameRow{"an empty Content-Length is named", "POST /v1/jobs HTTP/1.1\r\nContent-Length:\r\n\r\n", S::kBad,
                 400, "Content-Length"},
        FrameRow{"two different Content-Lengths are refused",
                 "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", S::kBad, 400,
                 "Content-Length"},
        FrameRow{"Content-Length with Transfer-Encoding is refused (request smuggling)",
                 "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", S::kBad, 400,
                 "Content-Length"},
        FrameRow{"a Transfer-Encoding other than chunked is not implemented",
                 "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", S::kBad, 501, "Transfer-Encoding"},
        FrameRow{"a body over the limit is 413 before it arrives",
                 "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", S::kBad, 413, ""},
        FrameRow{"a head over the limit is 431", "GET / HTTP/1.1\r\nX: " + std::string(1100, 'a') + "\r\n\r\n",
                 S::kBad, 431, ""},
        FrameRow{"an endless head is 431 before its end", "GET / HTTP/1.1\r\nX: " + std::string(1100, 'a'),
                 S::kBad, 431, ""},
        FrameRow{"a garbage request line is refused at once", "\x16\x03\x01 hello\r\n", S::kBad, 400, ""},
        FrameRow{"a lower-case method is refused", "get / HTTP/1.1\r\n\r\n", S::kBad, 400, ""},
        FrameRow{"raw bytes over 0x7f in the target are refused", "GET /v1/jobs/\xff HTTP/1.1\r\n\r\n", S::kBad,
                 400, ""},
        FrameRow{"HTTP/2.0 in the request line is refused", "GET / HTTP/2.0\r\n\r\n", S::kBad, 400, ""},
        FrameRow{"bare LF line ends are refused", "GET / HTTP/1.1\nHost: x\n\n", S::kBad, 400, ""},
        FrameRow{"a header line without a colon is refused", "GET / HTTP/1.1\r\nHost x\r\n\r\n", S::kBad, 400,
                 ""},
        FrameRow{"a chunked body is complete at its last chunk and blank line",
                 "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", S::kComplete},
        FrameRow{"a chunked body without its last chunk is incomplete",
                 "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", S::kIncomplete},
        FrameRow{"chunks adding up past the limit are 413",
                 "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'a') +
                     "\r\n40\r\n",
                 S::kBad, 413, ""},
        FrameRow{"a bad chunk size is refused",
                 "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", S::kBad, 400, ""}),
    [](const ::testing::TestParamInfo<FrameRow>& i) { return gstest::test_name(i.param.sentence); });

// ---------------------------------------------------------------------------
// The edge on real sockets, with a router of the test's.

struct TestServer {
  HttpRouter router;
  std::unique_ptr<HttpEdge> edge;
  int port = 0;
  std::thread thread;
  std::promise<void> release;
  std::shared_future<void> released{release.get_future().share()};
  std::atomic<int> slow_entered{0};

  explicit TestServer(HttpEdgeOptions o) {
    router.Get("/fast", [](const httplib::Request&, httplib::Response& res) { res.set_content("fast", "text/plain"); });
    router.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.body, "text/plain");
    });
    router.Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      ++slow_entered;
      released.wait();
      res.set_content("slow", "text/plain");
    });
    router.Get("/stream", [this](const httplib::Request&, httplib::Response& res) {
      ++slow_entered;
      res.set_chunked_content_provider("text/plain", [](size_t, httplib::DataSink& sink) {
        while (sink.is_writable()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return false;
      });
    });
    o.is_stream = [](std::string_view, std::string_view target) { return target == "/stream"; };
    edge = std::make_unique<HttpEdge>(router, std::move(o));
    port = edge->bind("127.0.0.1", 0);
    thread = std::thread([this] { edge->serve(); });
  }
  ~TestServer() {
    try {
      release.set_value();
    } catch (...) {
    }
    edge->stop();
    thread.join();
  }
  void wait_for(std::function<bool()> cond) {
    bool met = false;  // cond() is called until true, never after
    for (int i = 0; i < 3000 && !(met = cond()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(met);
  }
  std::string get(const std::string& path) {
    int fd = connect_to(port);
    send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::string r = read_until_close(fd);
    ::close(fd);
    return r;
  }
};

TEST(EdgeSockets, ContentLengthMinusOneIsA400NamingTheHeader) {
  TestServer s({});
  int fd = connect_to(s.port);
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n");
  std::string r = read_until_close(fd);
  ::close(fd);
  ASSERT_EQ(status_of(r), 400) << r;
  EXPECT_EQ(body_of(r)["error"]["field"], "Content-Length") << r;
}

TEST(EdgeSockets, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  TestServer s({});
  int fd = connect_to(s.port);
  send_all(fd, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
               "hello");
  std::string r = read_responses(fd, 2);
  ::close(fd);
  const size_t second = r.find("HTTP/1.1", 1);
  ASSERT_NE(second, std::string::npos) << r;
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.substr(0, second).find("\r\n\r\nfast"), std::string::npos) << r;
  EXPECT_EQ(status_of(r.substr(second)), 200);
  EXPECT_NE(r.substr(second).find("\r\n\r\nhello"), std::string::npos) << r;
}

TEST(EdgeSockets, KeepAliveCarriesManyRequestsOnOneConnection) {
  TestServer s({});
  httplib::Client c("127.0.0.1", s.port);
  c.set_keep_alive(true);
  for (int i = 0; i < 50; ++i) {
    auto r = c.Post("/echo", "n" + std::to_string(i), "text/plain");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "n" + std::to_string(i));
  }
  EXPECT_EQ(s.edge->stats().accepted, 1u);
}

TEST(EdgeSockets, Expect100ContinueIsAnsweredByTheEdgeOnce) {
  TestServer s({});
  int fd = connect_to(s.port);
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  std::string interim;
  char buf[256];
  while (interim.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    interim.append(buf, size_t(n));
  }
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "body");
  std::string r = read_responses(fd, 1);
  ::close(fd);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(r.find("100 Continue"), std::string::npos) << "a second interim answer: " << r;
  EXPECT_NE(r.find("\r\n\r\nbody"), std::string::npos) << r;
}

TEST(EdgeSockets, AHeadThatDoesNotArriveInTimeIsAnswered408AndClosed) {
  HttpEdgeOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  TestServer s(o);
  int fd = connect_to(s.port);
  send_all(fd, "GET /fast HTTP/1.1\r\nHost: x\r\n");  // never ends its head
  std::string r = read_until_close(fd);
  ::close(fd);
  ASSERT_EQ(status_of(r), 408) << r;
  EXPECT_EQ(body_of(r)["error"]["code"], "request_timeout");
  EXPECT_EQ(s.edge->stats().timed_out, 1u);
}

TEST(EdgeSockets, ABodyThatDoesNotArriveInTimeIsAnswered408) {
  HttpEdgeOptions o;
  o.body_timeout = std::chrono::milliseconds(300);
  TestServer s(o);
  int fd = connect_to(s.port);
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  std::string r = read_until_close(fd);
  ::close(fd);
  ASSERT_EQ(status_of(r), 408) << r;
  EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("body"), std::string::npos);
}

TEST(EdgeSockets, AnIdleKeptAliveConnectionIsClosed) {
  HttpEdgeOptions o;
  o.idle_timeout = std::chrono::milliseconds(300);
  TestServer s(o);
  int fd = connect_to(s.port);
  send_all(fd, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r = read_until_close(fd);  // the answer, then the close at the idle deadline
  ::close(fd);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_EQ(r.find("<still open>"), std::string::npos);
}

TEST(EdgeSockets, ConnectionsOverTheCapAreAnswered503AndTheOthersStillServed) {
  HttpEdgeOptions o;
  o.max_connections = 3;
  TestServer s(o);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect_to(s.port));
  s.wait_for([&] { return s.edge->stats().open == 3; });
  int extra = connect_to(s.port);
  std::string r = read_until_close(extra);
  ::close(extra);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_EQ(body_of(r)["error"]["code"], "overloaded");
  // A held connection is served.
  send_all(held[0], "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(read_responses(held[0], 1)), 200);
  for (int fd : held) ::close(fd);
}

TEST(EdgeSockets, AFullQueueIsAnswered503InsteadOfWaiting) {
  HttpEdgeOptions o;
  o.workers = 1;
  o.max_queue = 0;
  TestServer s(o);
  auto slow = std::async(std::launch::async, [&] { return s.get("/slow"); });
  s.wait_for([&] { return s.slow_entered.load() == 1; });  // the one worker is taken
  std::string r = s.get("/fast");
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_EQ(body_of(r)["error"]["code"], "overloaded");
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos) << r;
  s.release.set_value();
  EXPECT_EQ(status_of(slow.get()), 200);
  // Its client has the answer before the worker is free again (the task
  // ends after the last write): once it is, the next request is served.
  s.wait_for([&] { return s.edge->stats().in_flight == 0; });
  EXPECT_EQ(status_of(s.get("/fast")), 200);
  EXPECT_EQ(s.edge->stats().rejected_busy, 1u);
}

TEST(EdgeSockets, StreamsRunOnTheirOwnPoolAndDoNotTakeTheWorkers) {
  HttpEdgeOptions o;
  o.workers = 1;
  o.stream_workers = 2;
  TestServer s(o);
  std::vector<int> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(connect_to(s.port));
    send_all(streams.back(), "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  s.wait_for([&] { return s.slow_entered.load() == 2; });
  // A third stream finds the stream pool full; ordinary requests still go.
  EXPECT_EQ(status_of(s.get("/stream")), 503);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(s.get("/fast")), 200);
  // A stream whose client left frees its slot.
  ::close(streams[0]);
  streams.erase(streams.begin());
  s.wait_for([&] {
    int fd = connect_to(s.port);
    send_all(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    // A stream answers a chunked 200 head at once; a refusal is a 503.
    std::string head;
    char buf[64];
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) > 0) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n > 0) head.assign(buf, size_t(n));
    }
    const bool ok = status_of(head) == 200;
    if (ok) streams.push_back(fd);
    else ::close(fd);
    return ok;
  });
  for (int fd : streams) ::close(fd);
}

TEST(EdgeSockets, StopEndsStreamsInFlightAndIsSafeTwice) {
  auto s = std::make_unique<TestServer>(HttpEdgeOptions{});
  int fd = connect_to(s->port);
  send_all(fd, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  s->wait_for([&] { return s->slow_entered.load() == 1; });
  s->edge->stop();
  s->edge->stop();
  std::string r = read_until_close(fd);
  ::close(fd);
  EXPECT_EQ(status_of(r), 200);
  EXPECT_EQ(r.find("<still open>"), std::string::npos);
}

TEST(EdgeBytes, ARangeHeaderNeitherCutsTheDocumentNorAnswersAnEmpty416) {
  HttpRouter router;
  router.Get("/doc", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"whole":"document"})", "application/json");
  });
  for (const char* range : {"bytes=0-3", "bytes=900-999", "bytes=x"}) {
    const std::string out = controller::serve_bytes(
        router, std::string("GET /doc HTTP/1.1\r\nHost: x\r\nRange: ") + range + "\r\n\r\n", HttpEdgeOptions{});
    EXPECT_EQ(status_of(out), 200) << range << ": " << out;
    EXPECT_EQ(body_of(out), json({{"whole", "document"}})) << range << ": " << out;
  }
}

TEST(EdgeBytes, ServeBytesRunsTheSameFramingAndRouter) {
  HttpRouter router;
  router.Get("/fast", [](const httplib::Request&, httplib::Response& res) { res.set_content("fast", "text/plain"); });
  const std::string out = controller::serve_bytes(
      router, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", HttpEdgeOptions{});
  const size_t second = out.find("HTTP/1.1", 1);
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_EQ(status_of(out), 200);
  EXPECT_EQ(status_of(out.substr(second)), 400);
  EXPECT_EQ(body_of(out.substr(second))["error"]["field"], "Content-Length");
}

// ---------------------------------------------------------------------------
// The real controller process under hostile clients.

const char* kUser = "user-token-team-a-0001";

struct Hostile {
  gstest::TempDir dir;
  std::unique_ptr<ctltest::ControllerProcess> proc;
  int port = 0;
  explicit Hostile(const std::string& worker_script) {
    std::ofstream(dir.file("tokens")) << kUser << ",team-a,user\n";
    std::ofstream(dir.file("regions.yaml")) << "regions:\n  - {name: DE, nodes: 64, intensity: 300}\n";
    std::ofstream(dir.file("worker.sh")) << worker_script;
    ::chmod(dir.file("worker.sh").c_str(), 0755);
    proc = std::make_unique<ctltest::ControllerProcess>(
        CONTROLLER_BIN,
        std::vector<std::string>{"--port", "0", "--data-dir", dir.file("data"), "--tokens", dir.file("tokens"),
                                 "--regions", dir.file("regions.yaml"), "--worker", dir.file("worker.sh"),
                                 "--cycle-ms", "50", "--stop-grace-ms", "1000"},
        dir.file("controller.log"), dir.file("port"));
    port = proc->port();
  }
  ~Hostile() { proc->kill(SIGTERM); }
  // A normal client: fresh connection, a hang detector of 10 s.
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(10);
    c.set_read_timeout(10);
    c.set_write_timeout(10);
    c.set_bearer_token_auth(kUser);
    return c;
  }
};

const char* kSpec = R"({"name":"j","nodes":1,"regions":["DE"],"estimate":{"duration_s":60,"power_watts":100},"worker":{"data":{"train":"none"}}})";

void raise_fd_limit() {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
}

TEST(HostileClients, FiveHundredIdleAndFiftySlowlorisSocketsDoNotStopSubmitsOrHealthz) {
  raise_fd_limit();
  Hostile h("#!/bin/sh\nexit 0\n");
  std::vector<int> idle, slow;
  for (int i = 0; i < 500; ++i) idle.push_back(connect_to(h.port));
  for (int i = 0; i < 50; ++i) {
    slow.push_back(connect_to(h.port));
    send_all(slow.back(), "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n");
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {  // one more header byte per socket every 200 ms
    while (!done.load()) {
      for (int fd : slow) ::send(fd, "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    auto c = h.client();
    auto hz = c.Get("/healthz");
    auto sub = c.Post("/v1/jobs", kSpec, "application/json");
    ok += hz && hz->status == 200 && sub && sub->status == 201;
  }
  done = true;
  trickle.join();
  EXPECT_EQ(ok, 40) << h.proc->log();
  for (int fd : idle) ::close(fd);
  for (int fd : slow) ::close(fd);
}

// The two requests that ended the controller process (issue 33): a path
// with an invalid UTF-8 byte echoed into the 404, and a `worker` nested
// 70,000 arrays deep. Each is a 4xx with a JSON body, and the same process
// answers /healthz afterwards.
TEST(HostileClients, TheRequestsThatCrashedTheControllerAreRefusedAndItLivesOn) {
  Hostile h("#!/bin/sh\nexit 0\n");
  for (const char* path : {"/v1/jobs/%ff", "/v1/%ff"}) {
    auto r = h.client().Get(path);
    ASSERT_TRUE(r) << path << ": no answer\n" << h.proc->log();
    EXPECT_EQ(r->status / 100, 4) << path << ": " << r->body;
    EXPECT_FALSE(json::parse(r->body, nullptr, false).is_discarded()) << r->body;
  }
  std::string deep = R"({"name":"j","nodes":1,"regions":["DE"],"estimate":{"duration_s":60,"power_watts":100},"worker":)";
  deep += std::string(70000, '[') + std::string(70000, ']') + "}";
  auto r = h.client().Post("/v1/jobs?dryRun=true", deep, "application/json");
  ASSERT_TRUE(r) << "no answer to the deep body\n" << h.proc->log();
  EXPECT_EQ(r->status, 400) << r->body.substr(0, 300);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "too_deep") << r->body;
  auto hz = h.client().Get("/healthz");
  ASSERT_TRUE(hz) << h.proc->log();
  EXPECT_EQ(hz->status, 200);
}

TEST(HostileClients, TwentyLogStreamsTakeOnlyTheStreamPool) {
  raise_fd_limit();
  // The stand-in worker runs until the controller is gone.
  Hostile h("#!/bin/sh\necho \"rank $RANK up\"\nwhile kill -0 $PPID 2>/dev/null; do sleep 0.2; done\n");
  auto c = h.client();
  auto sub = c.Post("/v1/jobs", kSpec, "application/json");
  ASSERT_TRUE(sub && sub->status == 201) << (sub ? sub->body : "no answer");
  const std::string id = json::parse(sub->body)["id"];
  for (int i = 0; i < 3000; ++i) {
    auto g = c.Get("/v1/jobs/" + id);
    if (g && json::parse(g->body)["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<int> streams;
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    int fd = connect_to(h.port);
    send_all(fd, "GET /v1/jobs/" + id + "/logs?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                     kUser + "\r\n\r\n");
    streams.push_back(fd);
  }
  // Ordinary requests are served while the streams are held.
  int ok = 0;
  for (int i = 0; i < 20; ++i) {
    auto c2 = h.client();
    auto hz = c2.Get("/healthz");
    auto g = c2.Get("/v1/jobs/" + id);
    ok += hz && hz->status == 200 && g && g->status == 200;
  }
  EXPECT_EQ(ok, 20) << h.proc->log();
  // The streams beyond the pool were told so.
  for (int fd : streams) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) > 0) {
      char buf[512];
      ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 12 && status_of(std::string(buf, size_t(n))) == 503) ++refused;
    }
  }
  EXPECT_GE(refused, 12);
  for (int fd : streams) ::close(fd);
}

}  // namespace
