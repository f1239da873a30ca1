// Token rotation without a restart (docs/controller.md, "Rotating tokens"):
// controller::AuthReloader on real files in a temp dir, then the real
// greenshard-controller process — a revoked token is refused, an added one
// accepted, SIGHUP reloads at once, a broken file keeps the last good tokens
// and names its line.
//
// The one-second revocation bound holds by design: the file is stat()ed
// every kTokensPollDefault (200 ms, checked below) and a reload is one parse.
// The tests only wait (up to 10 s, polling) for the reload and then check
// that it happened (the reload counter, the log line); they assert no
// timing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/spawn.h"
#include "controller/api/auth.h"
#include "process.h"

using namespace std::chrono_literals;
using controller::Auth;
using controller::AuthReloader;
using controller::AuthReloadOptions;

namespace {

const char* kAlice = "alice-token-0123456789";
const char* kBob = "bob-token-0123456789ab";
const char* kCarol = "carol-token-0123456789";
const char* kOps = "ops-token-0123456789ab";

static_assert(controller::kTokensPollDefault <= 250ms,
              "a revoked token must be refused within one second: poll interval + one parse");

// Rewrites `path` in place (same inode) with one write(2). A reload that
// runs between the truncation and the write sees an empty file, which is
// refused (a failure, not a reload): counts of reloads stay exact.
void write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, text.data(), text.size()), ssize_t(text.size()));
  ::close(fd);
}

// Writes a sibling file and renames it over `path` (what editors, `kubectl`'s
// Secret volumes and careful scripts do): a new inode.
void replace_file(const std::string& path, const std::string& text) {
  write_file(path + ".new", text);
  ASSERT_EQ(std::rename((path + ".new").c_str(), path.c_str()), 0);
}

std::string line(const char* token, const std::string& tenant, const std::string& role) {
  return std::string(token) + "," + tenant + "," + role + "\n";
}

// Polls pred() every 10 ms for up to `limit` (a generous bound; never a
// timing assertion).
template <class P>
bool eventually(P pred, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

// Collects the reloader's log lines.
struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lk(mu);
      lines.push_back(l);
    };
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lk(mu);
    return lines;
  }
  std::string all() {
    std::string s;
    for (auto& l : get()) s += l + "\n";
    return s;
  }
};

struct Files {
  gstest::TempDir dir;
  std::string tokens = dir.file("tokens");
  Files() { write_file(tokens, line(kAlice, "team-a", "user") + line(kBob, "team-b", "user")); }
};

}  // namespace

// ---- Auth: one table, swapped whole ----

TEST(AuthTable, ReplaceSwapsTheWholeTableAndCopiesKeepTheirs) {
  Auth a = Auth::from_text(line(kAlice, "team-a", "user"));
  Auth copy = a;
  a.replace(Auth::from_text(line(kBob, "team-b", "user") + line(kOps, "ops", "admin")));
  EXPECT_FALSE(a.lookup(kAlice));
  ASSERT_TRUE(a.lookup(kBob));
  EXPECT_EQ(a.lookup(kOps)->tenant, "*");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(copy.lookup(kAlice));
  EXPECT_EQ(copy.size(), 1u);
}

TEST(AuthTable, ConcurrentLookupsSeeTheOldOrTheNewTableNeverAMix) {
  // Alice is a team-a user in table x and a team-z admin in table y: while
  // the tables are swapped, every lookup gives one of the two, whole.
  const Auth x = Auth::from_text(line(kAlice, "team-a", "user") + line(kBob, "team-b", "user"));
  const Auth y = Auth::from_text(line(kCarol, "team-c", "user") + line(kAlice, "team-z", "admin"));
  Auth live = x;
  std::atomic<bool> done{false};
  std::atomic<long> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      while (!done) {
        auto p = live.lookup(kAlice);
        if (!p || !((p->token_tenant == "team-a" && p->role == controller::Role::kUser) ||
                    (p->token_tenant == "team-z" && p->role == controller::Role::kAdmin && p->tenant == "*")))
          ++bad;
        ++reads;
      }
    });
  // Swap until the readers have read a while (a count, not a time: on two
  // cores the readers may start only after many swaps).
  for (long i = 0; i < 2000 || reads.load() < 20000; ++i) live.replace(i % 2 ? x : y);
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

// ---- AuthReloader on real files ----

TEST(AuthReloader, ARemovedTokenIsRefusedWithoutARestart) {
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  Log log;
  AuthReloadOptions o;  // the default poll interval
  o.log = log.sink();
  AuthReloader r(auth, f.tokens, o);
  ASSERT_TRUE(auth.lookup(kAlice));
  write_file(f.tokens, line(kBob, "team-b", "user"));  // in place, same inode
  // The reload is done once it is logged: the tokens are replaced first,
  // then counted, then logged.
  ASSERT_TRUE(eventually([&] { return log.all().find("reloaded") != std::string::npos; })) << log.all();
  EXPECT_FALSE(auth.lookup(kAlice));
  EXPECT_TRUE(auth.lookup(kBob));
  EXPECT_EQ(r.reloads(), 1u) << log.all();
  EXPECT_NE(log.all().find("'" + f.tokens + "' reloaded (changed): 1 tokens, was 2"), std::string::npos)
      << log.all();
}

TEST(AuthReloader, AnAddedTokenIsAcceptedAndAReplaceByRenameIsSeen) {
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  Log log;
  AuthReloadOptions o;
  o.log = log.sink();
  AuthReloader r(auth, f.tokens, o);
  EXPECT_FALSE(auth.lookup(kCarol));
  replace_file(f.tokens, line(kAlice, "team-a", "user") + line(kBob, "team-b", "user") +
                             line(kCarol, "team-c", "admin"));
  ASSERT_TRUE(eventually([&] { return r.reloads() >= 1; })) << log.all();  // counted after the replace
  ASSERT_TRUE(auth.lookup(kCarol).has_value()) << log.all();
  EXPECT_EQ(auth.lookup(kCarol)->tenant, "*");
  EXPECT_TRUE(auth.lookup(kAlice));
  EXPECT_GE(r.reloads(), 1u);
}

TEST(AuthReloader, ASameSizeRewriteRightAfterTheLastOneIsStillSeen) {
  // Same length, same inode, written within the same timestamp tick as the
  // previous write: the stat alone cannot tell, the bytes can.
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  AuthReloadOptions o;
  o.log = [](const std::string&) {};
  AuthReloader r(auth, f.tokens, o);
  // kBob and kOps have the same length.
  write_file(f.tokens, line(kAlice, "team-a", "user") + line(kOps, "team-b", "user"));
  EXPECT_TRUE(eventually([&] { return auth.lookup(kOps).has_value() && !auth.lookup(kBob); }));
}

TEST(AuthReloader, ABrokenFileKeepsTheLastGoodTokensAndNamesTheLine) {
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  Log log;
  AuthReloadOptions o;
  o.log = log.sink();
  std::atomic<int> ok{0}, failed{0};
  o.on_reload = [&](bool good) { ++(good ? ok : failed); };
  AuthReloader r(auth, f.tokens, o);
  replace_file(f.tokens, "# rotated\n" + line(kCarol, "team-c", "user") + "no-commas-on-this-line-at-all\n");
  ASSERT_TRUE(eventually([&] { return r.failures() == 1; })) << log.all();
  EXPECT_TRUE(auth.lookup(kAlice));  // nothing loaded before is lost
  EXPECT_TRUE(auth.lookup(kBob));
  EXPECT_FALSE(auth.lookup(kCarol));  // nothing of the broken file is used
  EXPECT_EQ(r.reloads(), 0u);
  EXPECT_EQ(failed.load(), 1);
  auto lines = log.get();
  ASSERT_EQ(lines.size(), 1u) << log.all();  // one line, not one per poll
  EXPECT_NE(lines[0].find(f.tokens + ":3: expected 'token,tenant,role'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("keeping the 2 tokens in force"), std::string::npos) << lines[0];

  // A missing file: the same.
  ASSERT_EQ(std::remove(f.tokens.c_str()), 0);
  ASSERT_TRUE(eventually([&] { return r.failures() == 2; })) << log.all();
  EXPECT_TRUE(auth.lookup(kAlice));
  EXPECT_NE(log.get().back().find("'" + f.tokens + "': cannot read: No such file or directory"),
            std::string::npos) << log.all();

  // Fixed: in force again.
  replace_file(f.tokens, line(kCarol, "team-c", "user"));
  // on_reload is the reload's last step (after the replace and the count).
  ASSERT_TRUE(eventually([&] { return ok.load() == 1; })) << log.all();
  EXPECT_TRUE(auth.lookup(kCarol).has_value());
  EXPECT_FALSE(auth.lookup(kAlice));
  EXPECT_EQ(r.reloads(), 1u);
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(r.failures(), 2u);
}

TEST(AuthReloader, ARequestReloadsAtOnceWithPollingOff) {
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  Log log;
  AuthReloadOptions o;
  o.poll = 0ms;  // request_reload() only
  o.log = log.sink();
  AuthReloader r(auth, f.tokens, o);
  write_file(f.tokens, line(kBob, "team-b", "user"));
  std::this_thread::sleep_for(300ms);  // longer than a default poll: nothing watches
  EXPECT_TRUE(auth.lookup(kAlice));
  EXPECT_EQ(r.reloads(), 0u);
  r.request_reload();
  ASSERT_TRUE(eventually([&] { return r.reloads() == 1; })) << log.all();
  EXPECT_FALSE(auth.lookup(kAlice));
  EXPECT_NE(log.all().find("reloaded (requested): 1 tokens, was 2"), std::string::npos) << log.all();
  // A request re-reads even an unchanged file.
  r.request_reload();
  EXPECT_TRUE(eventually([&] { return r.reloads() == 2; })) << log.all();
}

TEST(AuthReloader, StopJoinsAndIsSafeTwiceAndFromSeveralThreads) {
  Files f;
  Auth auth = Auth::load_file(f.tokens);
  AuthReloadOptions o;
  o.log = [](const std::string&) {};
  {
    AuthReloader r(auth, f.tokens, o);
    r.stop();
    r.stop();
    r.request_reload();  // after stop: harmless
    write_file(f.tokens, line(kBob, "team-b", "user"));
    std::this_thread::sleep_for(300ms);
    EXPECT_TRUE(auth.lookup(kAlice));  // stopped: nothing reloads
  }  // the destructor stops again
  {
    AuthReloader r(auth, f.tokens, o);  // starts from the file as it is now
    EXPECT_FALSE(auth.lookup(kAlice));
    std::thread a([&] { r.stop(); }), b([&] { r.stop(); });
    a.join();
    b.join();
  }
}

// ---- the real controller ----

namespace {

struct ProcEnv {
  gstest::TempDir dir;
  std::string tokens = dir.file("tokens");
  ProcEnv() { write_file(tokens, line(kAlice, "team-a", "user") + line(kBob, "team-b", "user")); }
  std::unique_ptr<ctltest::ControllerProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--port", "0", "--data-dir", dir.file("data"), "--tokens", tokens,
                                     "--worker", "/bin/false", "--cycle-ms", "100"};
    for (auto& e : extra) args.push_back(e);
    return std::make_unique<ctltest::ControllerProcess>(CONTROLLER_BIN, args, dir.file("controller.log"),
                                                        dir.file("port"));
  }
};

int status(int port, const std::string& token) {
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(token);
  c.set_read_timeout(std::chrono::seconds(30));
  auto r = c.Get("/v1/jobs");
  return r ? r->status : -1;
}

// The value of an unlabelled metric in GET /metrics, or -1.
double metric(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  std::string l;
  while (std::getline(in, l))
    if (l.rfind(name + " ", 0) == 0) return std::stod(l.substr(name.size() + 1));
  return -1;
}

}  // namespace

TEST(ControllerTokens, ARevokedTokenIsRefusedAndAnAddedOneAcceptedWithoutARestart) {
  ProcEnv e;
  auto ctl = e.start();  // the default poll interval
  const int port = ctl->port();
  const pid_t pid = ctl->pid();
  ASSERT_EQ(status(port, kAlice), 200) << ctl->log();
  ASSERT_EQ(status(port, kCarol), 401);
  EXPECT_EQ(metric(port, "greenshard_auth_reloads_total"), 0);

  // Alice revoked, Carol added, by an editor's write-and-rename.
  replace_file(e.tokens, line(kBob, "team-b", "user") + line(kCarol, "team-c", "user"));
  EXPECT_TRUE(eventually([&] { return status(port, kAlice) == 401; })) << ctl->log();
  EXPECT_EQ(status(port, kCarol), 200) << ctl->log();
  EXPECT_EQ(status(port, kBob), 200);
  EXPECT_EQ(metric(port, "greenshard_auth_reloads_total"), 1) << ctl->log();
  EXPECT_EQ(metric(port, "greenshard_auth_reload_failures_total"), 0);
  EXPECT_NE(ctl->log().find("tokens file '" + e.tokens + "' reloaded (changed): 2 tokens, was 2"),
            std::string::npos) << ctl->log();
  EXPECT_EQ(ctl->pid(), pid);  // the same process: no restart

  // In place (same inode): Bob revoked.
  write_file(e.tokens, line(kCarol, "team-c", "user"));
  EXPECT_TRUE(eventually([&] { return status(port, kBob) == 401; })) << ctl->log();
  EXPECT_EQ(status(port, kCarol), 200);
  EXPECT_EQ(metric(port, "greenshard_auth_reloads_total"), 2) << ctl->log();
}

TEST(ControllerTokens, SighupReloadsAtOnce) {
  ProcEnv e;
  auto ctl = e.start({"--tokens-poll-ms", "0"});  // no polling: only SIGHUP reloads
  const int port = ctl->port();
  ASSERT_EQ(status(port, kAlice), 200) << ctl->log();
  write_file(e.tokens, line(kBob, "team-b", "user") + line(kCarol, "team-c", "user"));
  EXPECT_EQ(status(port, kAlice), 200);  // nothing watches the file
  EXPECT_EQ(metric(port, "greenshard_auth_reloads_total"), 0);
  ASSERT_EQ(::kill(ctl->pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return metric(port, "greenshard_auth_reloads_total") == 1; })) << ctl->log();
  EXPECT_EQ(status(port, kAlice), 401);
  EXPECT_EQ(status(port, kCarol), 200);
  EXPECT_NE(ctl->log().find("reloaded (requested): 2 tokens, was 2"), std::string::npos) << ctl->log();
  // Still serving: SIGHUP is no shutdown.
  ASSERT_EQ(::kill(ctl->pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return metric(port, "greenshard_auth_reloads_total") == 2; })) << ctl->log();
  EXPECT_EQ(status(port, kBob), 200);
  EXPECT_EQ(ctl->log().find("shutting down"), std::string::npos) << ctl->log();
}

TEST(ControllerTokens, ABrokenFileKeepsTheOldTokensAndLogsItsLine) {
  ProcEnv e;
  auto ctl = e.start();
  const int port = ctl->port();
  ASSERT_EQ(status(port, kAlice), 200) << ctl->log();
  replace_file(e.tokens, line(kCarol, "team-c", "user") + line(kOps, "Ops!", "admin"));
  EXPECT_TRUE(eventually([&] { return metric(port, "greenshard_auth_reload_failures_total") == 1; }))
      << ctl->log();
  EXPECT_EQ(status(port, kAlice), 200);
  EXPECT_EQ(status(port, kBob), 200);
  EXPECT_EQ(status(port, kCarol), 401);
  EXPECT_EQ(metric(port, "greenshard_auth_reloads_total"), 0);
  const std::string log = ctl->log();
  EXPECT_NE(log.find("tokens file reload failed, keeping the 2 tokens in force: " + e.tokens +
                     ":2: tenant 'Ops!' must be 1..63 of [a-z0-9-]"),
            std::string::npos) << log;
  // SIGHUP on the broken file: refused again, still the old tokens, still up.
  ASSERT_EQ(::kill(ctl->pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return metric(port, "greenshard_auth_reload_failures_total") == 2; }))
      << ctl->log();
  EXPECT_EQ(status(port, kAlice), 200);
  // Fixed: in force.
  write_file(e.tokens, line(kCarol, "team-c", "user"));
  EXPECT_TRUE(eventually([&] { return status(port, kCarol) == 200; })) << ctl->log();
  EXPECT_EQ(status(port, kAlice), 401);
}

TEST(ControllerTokens, SigtermStillShutsDownWithTheReloaderRunning) {
  ProcEnv e;
  auto ctl = e.start();
  ASSERT_GT(ctl->port(), 0);
  ctl->kill(SIGTERM);  // waits for the exit: a reloader that did not stop would hang here
  EXPECT_NE(ctl->log().find("signal 15, shutting down"), std::string::npos) << ctl->log();
}
