// One controller per store, and a corrupt store, with the real
// greenshard-controller: a second controller on a --data-dir in use exits 1
// naming the holder's pid and the directory, and touches nothing; the
// first one keeps serving; once it stops, the directory is free again.
// A store of garbage bytes (or with a damaged page) is exit 1 naming the
// file and --check-store; --check-store itself (no --tokens needed) is 0 on
// a sound store, 1 on a damaged one, and refuses a directory in use.
#include <gtest/gtest.h>
#include <httplib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/spawn.h"
#include "process.h"

using json = nlohmann::json;
using ctltest::ControllerProcess;

namespace {

const char* kToken = "user-token-team-a-0001";

struct Env {
  gstest::TempDir dir;
  std::string data, tokens, regions;
  int starts = 0;
  Env() {
    data = dir.file("data");
    std::filesystem::create_directories(data);
    data = std::filesystem::canonical(data).string();  // as the controller names it
    tokens = dir.file("tokens");
    regions = dir.file("regions.yaml");
    std::ofstream(tokens) << kToken << ",team-a,user\n";
    std::ofstream(regions) << "regions:\n  - {name: DE, nodes: 2, intensity: 300}\n";
  }
  std::string db() const { return data + "/controller.db"; }
  std::vector<std::string> args() const {
    // --worker /bin/false: a job placed fails to launch, and stays stored.
    return {"--port", "0", "--data-dir", data, "--tokens", tokens, "--regions", regions,
            "--worker", "/bin/false", "--cycle-ms", "50"};
  }
  // A controller in the background (its own log and port file per start).
  std::unique_ptr<ControllerProcess> start() {
    const std::string n = std::to_string(++starts);
    return std::make_unique<ControllerProcess>(CONTROLLER_BIN, args(), dir.file("controller" + n + ".log"),
                                               dir.file("port" + n));
  }
  // A controller run to its end (it is expected to refuse to start).
  gstest::RankResult run(std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {CONTROLLER_BIN};
    for (auto& a : args()) argv.push_back(a);
    for (auto& a : extra) argv.push_back(a);
    return gstest::run_process(argv, {}, std::chrono::seconds(60));
  }
  gstest::RankResult check_store() const {
    return gstest::run_process({CONTROLLER_BIN, "--check-store", "--data-dir", data}, {}, std::chrono::seconds(60));
  }
};

httplib::Client client(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(kToken);
  c.set_read_timeout(std::chrono::seconds(30));
  return c;
}

// Submits a job; returns its id.
std::string submit(int port) {
  auto c = client(port);
  auto r = c.Post("/v1/jobs", R"({"name": "lock", "worker": {"data": {"train": "x"}}, "regions": ["DE"]})",
                  "application/json");
  if (!r || r->status != 201) return "";
  return json::parse(r->body).value("id", "");
}

int get_status(int port, const std::string& path) {
  auto c = client(port);
  auto r = c.Get(path);
  return r ? r->status : -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST(StoreLock, SecondControllerOnTheSameDataDirExitsNamingTheHolder) {
  Env e;
  auto first = e.start();
  const int port = first->port();
  const std::string id = submit(port);
  ASSERT_FALSE(id.empty()) << first->log();

  auto second = e.run();
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_TRUE(has(second.output, "--data-dir " + e.data + " is in use by another controller (pid " +
                                     std::to_string(first->pid()) + "; lock " + e.data + "/controller.lock)"))
      << second.output;
  EXPECT_FALSE(has(second.output, "listening on")) << second.output;

  // --check-store does not run beside it either.
  auto check = e.check_store();
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(has(check.output, "--check-store: --data-dir " + e.data + " is in use by another controller (pid " +
                                    std::to_string(first->pid())))
      << check.output;

  // The first one still serves, its job still there.
  EXPECT_EQ(get_status(port, "/healthz"), 200);
  EXPECT_EQ(get_status(port, "/v1/jobs/" + id), 200);

  // Stopped, it frees the directory: the next controller starts and has the job.
  first->kill(SIGTERM);
  auto check_stopped = e.check_store();
  EXPECT_EQ(check_stopped.exit_code, 0) << check_stopped.output;
  EXPECT_TRUE(has(check_stopped.output, e.db() + ": ok (schema version")) << check_stopped.output;
  EXPECT_TRUE(has(check_stopped.output, "1 jobs")) << check_stopped.output;
  auto third = e.start();
  const int port3 = third->port();
  EXPECT_EQ(get_status(port3, "/v1/jobs/" + id), 200) << third->log();
  third->kill(SIGTERM);
}

// The lock comes before the store: with the directory held (here by the test
// itself, as a controller holds it) a controller refuses before it reads
// the store: a garbage store stays byte for byte, no WAL or shm file
// appears, and the message is the lock's, not the corrupt store's.
TEST(StoreLock, LockIsTakenBeforeTheStoreIsRead) {
  Env e;
  const std::string garbage(8192, '\x5a');
  std::ofstream(e.db(), std::ios::binary) << garbage;
  const int fd = ::open((e.data + "/controller.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid()) + "\n";
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), ssize_t(pid.size()));

  auto r = e.run();
  auto check = e.check_store();
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "is in use by another controller (pid " + std::to_string(::getpid()) + ";"))
      << r.output;
  EXPECT_FALSE(has(r.output, "corrupt")) << r.output;
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(has(check.output, "is in use by another controller")) << check.output;
  EXPECT_FALSE(has(check.output, "NOT OK")) << check.output;
  EXPECT_EQ(read_file(e.db()), garbage);
  EXPECT_FALSE(std::filesystem::exists(e.db() + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(e.db() + "-shm"));
}

// A lock file holding something else than a pid (outside input) reads as
// "pid unknown", and a free one is taken whatever it holds.
TEST(StoreLock, LockFileContentIsNotTrusted) {
  Env e;
  const int fd = ::open((e.data + "/controller.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string junk = "12ab\n99999999999999999999\n";
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
  auto r = e.run();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "(pid unknown; lock " + e.data + "/controller.lock)")) << r.output;
  ::close(fd);  // released: the next controller takes it and writes its pid
  auto ctl = e.start();
  ctl->port();
  EXPECT_EQ(read_file(e.data + "/controller.lock"), std::to_string(ctl->pid()) + "\n");
  ctl->kill(SIGTERM);
}

TEST(StoreLock, KilledControllerLeavesNoLockBehind) {
  Env e;
  auto first = e.start();
  first->port();
  first->kill(SIGKILL);  // no cleanup at all: the kernel drops the lock
  auto second = e.start();
  EXPECT_GT(second->port(), 0) << second->log();
  second->kill(SIGTERM);
}

TEST(StoreLock, GarbageStoreIsNamedWithTheWayOut) {
  Env e;
  {
    std::ofstream out(e.db(), std::ios::binary);
    for (int i = 0; i < 8192; ++i) out.put(char((i * 131 + 7) % 251));
  }
  auto r = e.run();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, "job store '" + e.db() + "' is corrupt")) << r.output;
  EXPECT_TRUE(has(r.output, "greenshard-controller --check-store --data-dir " + e.data)) << r.output;
  EXPECT_TRUE(has(r.output, "backup")) << r.output;
  EXPECT_FALSE(has(r.output, "listening on")) << r.output;

  auto check = e.check_store();
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(has(check.output, e.db() + ": NOT OK")) << check.output;
  EXPECT_TRUE(has(check.output, "file is not a database")) << check.output;
}

TEST(StoreLock, DamagedPageFailsCheckStore) {
  Env e;
  {
    auto ctl = e.start();
    const int port = ctl->port();
    for (int i = 0; i < 20; ++i) ASSERT_FALSE(submit(port).empty()) << ctl->log();
    ctl->kill(SIGTERM);  // closes the store: the WAL is checkpointed into the file
  }
  ASSERT_EQ(e.check_store().exit_code, 0);
  // Every page but the first (the header and the schema) overwritten.
  const auto size = std::filesystem::file_size(e.db());
  ASSERT_GT(size, 4096u * 3) << "too small a store to damage";
  {
    std::fstream f(e.db(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    for (size_t i = 4096; i < size; ++i) f.put(char(0xA5));
  }
  auto check = e.check_store();
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_TRUE(has(check.output, e.db() + ": NOT OK")) << check.output;
  EXPECT_TRUE(has(check.output, e.db())) << check.output;

  auto r = e.run();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r.output, e.db())) << r.output;
  EXPECT_TRUE(has(r.output, "--check-store")) << r.output;
}

TEST(StoreLock, CheckStoreNeedsAnExistingDirectoryAndNoTokens) {
  Env e;
  auto missing = gstest::run_process({CONTROLLER_BIN, "--check-store", "--data-dir", e.dir.file("nope")}, {},
                                     std::chrono::seconds(60));
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_TRUE(has(missing.output, "--data-dir " + e.dir.file("nope") + ": not a directory")) << missing.output;
  EXPECT_FALSE(std::filesystem::exists(e.dir.file("nope")));
  // A directory without a store: no file to check, named.
  auto empty = e.check_store();
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_TRUE(has(empty.output, e.db() + ": NOT OK\n  no job store here")) << empty.output;
  EXPECT_FALSE(std::filesystem::exists(e.db()));
  // Serving still needs --tokens.
  auto no_tokens = gstest::run_process({CONTROLLER_BIN, "--port", "0", "--data-dir", e.data}, {},
                                       std::chrono::seconds(60));
  EXPECT_EQ(no_tokens.exit_code, 2) << no_tokens.output;
  EXPECT_TRUE(has(no_tokens.output, "--tokens is required")) << no_tokens.output;
}
