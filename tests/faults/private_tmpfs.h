// A real full disk for fault tests: a size-limited tmpfs mounted in a
// private mount namespace, so no root and no mount outlives the test.
//
// The test binary re-executes itself inside the namespace
// (`unshare -rm sh -c 'mount -t tmpfs -o size=NNk tmpfs DIR && exec TEST'`;
// plain `unshare -m` when running as root where user namespaces are off)
// with GS_FAULT_SCENARIO=<name> and GS_FAULT_DIR=DIR: main() then runs only
// the scenario, a GoogleTest test registered under "Inside.<name>", with
// the tmpfs at DIR. Everything the scenario starts (controllers, ranks,
// greenshard-worker) inherits the namespace and sees the same tmpfs; the
// mount goes away with the namespace's last process. Network namespaces
// are not touched: loopback works as usual.
//
// The outer test (run_in_tmpfs) skips, saying why, when no private mount
// namespace can be had on this machine.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/spawn.h"

namespace faults {

// The directory the scenario's tmpfs is mounted on ("" outside a scenario).
inline std::string tmpfs_dir() {
  const char* d = std::getenv("GS_FAULT_DIR");
  return d ? d : "";
}

// Writes zeros to `path` until the file system is full (ENOSPC). Returns
// the bytes written; throws (naming the file) on any other error.
inline int64_t fill_disk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("fill_disk: cannot create " + path + ": " + std::strerror(errno));
  std::string zeros(64 << 10, '\0');
  int64_t total = 0;
  for (size_t chunk = zeros.size(); chunk > 0;) {
    const ssize_t w = ::write(fd, zeros.data(), chunk);
    if (w > 0) {
      total += w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != ENOSPC) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("fill_disk: " + path + ": " + std::strerror(err));
    }
    chunk /= 2;  // ENOSPC: smaller pieces until not even one byte fits
  }
  ::close(fd);
  return total;
}

// How this machine gives a test a private mount namespace: the argv prefix
// ("unshare -rm" or, as root, "unshare -m"), or empty with `why` set.
struct NamespaceWay {
  std::vector<std::string> prefix;
  std::string why;
};

inline NamespaceWay probe_namespace() {
  gstest::TempDir probe;
  const std::string mnt = probe.file("mnt");
  ::mkdir(mnt.c_str(), 0755);
  const std::string script = "mount -t tmpfs -o size=64k tmpfs \"$0\" && touch \"$0/x\"";
  NamespaceWay way;
  std::vector<std::vector<std::string>> tries = {{"unshare", "-rm"}};
  if (::geteuid() == 0) tries.push_back({"unshare", "-m"});
  for (const auto& t : tries) {
    std::vector<std::string> argv = t;
    argv.insert(argv.begin(), "/usr/bin/env");
    for (const char* a : {"sh", "-c"}) argv.push_back(a);
    argv.push_back(script);
    argv.push_back(mnt);
    auto r = gstest::run_process(argv, {}, std::chrono::seconds(60));
    struct stat st;
    if (r.exit_code == 0 && ::stat((mnt + "/x").c_str(), &st) != 0) {  // mounted privately: not seen here
      way.prefix = argv;
      way.prefix.resize(t.size() + 1);
      return way;
    }
    way.why += "`" + t[0] + " " + t[1] + " sh -c 'mount -t tmpfs ...'` failed (exit " + std::to_string(r.exit_code) +
               "): " + r.output + "; ";
  }
  if (::geteuid() != 0) way.why += "not root either, so no tmpfs can be mounted";
  return way;
}

// Runs scenario `name` of this test binary inside a private mount namespace
// with a tmpfs of `size_kb` KiB; fails the calling test when the scenario
// fails (with its output), skips when no namespace can be had.
#define GS_RUN_IN_TMPFS(name, size_kb, timeout_s)                                                         \
  do {                                                                                                    \
    const auto way_ = faults::probe_namespace();                                                          \
    if (way_.prefix.empty()) GTEST_SKIP() << "no private mount namespace for a small tmpfs: " << way_.why; \
    gstest::TempDir outer_;                                                                               \
    const std::string mnt_ = outer_.file("tmpfs");                                                        \
    ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0);                                                            \
    std::vector<std::string> argv_ = way_.prefix;                                                         \
    for (const char* a : {"sh", "-c"}) argv_.push_back(a);                                                \
    argv_.push_back("mount -t tmpfs -o size=\"$1\"k tmpfs \"$2\" || exit 97; exec \"$0\" --gtest_color=no"); \
    argv_.push_back(gstest::self_exe());                                                                  \
    argv_.push_back(std::to_string(size_kb));                                                             \
    argv_.push_back(mnt_);                                                                                \
    auto r_ = gstest::run_process(argv_, {{"GS_FAULT_SCENARIO", name}, {"GS_FAULT_DIR", mnt_}},           \
                                  std::chrono::seconds(timeout_s));                                       \
    EXPECT_FALSE(r_.timed_out) << r_.output;                                                              \
    EXPECT_EQ(r_.exit_code, 0) << r_.output;                                                              \
    /* the scenario ran (not filtered away) and passed */                                                 \
    EXPECT_NE(r_.output.find("[  PASSED  ] 1 test."), std::string::npos) << r_.output;                    \
    std::cout << r_.output.substr(r_.output.size() > 4000 ? r_.output.size() - 4000 : 0) << std::endl;    \
  } while (0)

// In main(): when this process is a scenario, registers it (Inside.<name>)
// from `scenarios` and filters GoogleTest to it. Call after InitGoogleTest.
inline void register_scenario(const std::map<std::string, std::function<void()>>& scenarios) {
  const char* name = std::getenv("GS_FAULT_SCENARIO");
  if (!name) return;
  struct Body : ::testing::Test {
    explicit Body(std::function<void()> f) : f_(std::move(f)) {}
    void TestBody() override { f_(); }
    std::function<void()> f_;
  };
  auto it = scenarios.find(name);
  if (it == scenarios.end()) {
    std::fprintf(stderr, "unknown GS_FAULT_SCENARIO '%s'\n", name);
    std::exit(2);
  }
  auto f = it->second;
  ::testing::RegisterTest("Inside", name, nullptr, nullptr, __FILE__, __LINE__,
                          [f]() -> ::testing::Test* { return new Body(f); });
  ::testing::GTEST_FLAG(filter) = std::string("Inside.") + name;
}

}  // namespace faults
