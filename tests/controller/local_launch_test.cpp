// The local executor's rank launch (clone(CLONE_VM | CLONE_VFORK) + execve):
// what a rank starts with, and that a launch leaves the controller's own
// signal handlers as they were. Real processes (a shell script as the worker).
//
// AHandlerTheControllerInstalledStillRunsInTheControllerAfterALaunch is the
// regression test of the store report found under TSan (docs/reliability.md):
// TSan's clone interceptor assumed fork's copy of memory and, in the child,
// re-initialised its runtime, which with CLONE_VM was the parent's; the
// child's sigaction went through TSan's interceptor and set TSan's table of
// the parent's handlers to SIG_DFL. Under scripts/sanitize.sh tsan it failed
// before the child went around the interceptors (the same corruption left
// the launching thread's synchronisation unseen: the store's report).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/spawn.h"
#include "controller/executors/executor_local.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Launcher {
  gstest::TempDir dir;
  std::unique_ptr<controller::Executor> ex;

  explicit Launcher(const std::string& script) {
    const std::string worker = dir.file("worker.sh");
    std::ofstream(worker) << script;
    ::chmod(worker.c_str(), 0755);
    controller::LocalExecutorOptions o;
    o.worker_path = worker;
    o.data_dir = dir.path();
    ex = controller::make_local_executor(o);
  }

  controller::GangStatus run(const std::string& id, int nodes = 1) {
    controller::GangSpec g;
    g.job_id = id;
    g.spec.nodes = nodes;
    g.spec.procs_per_node = 1;
    g.spec.worker = nlohmann::json::object();
    g.region = "DE";
    ex->start(g);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      controller::GangStatus st = ex->poll(id);
      if (st.phase != controller::GangPhase::kRunning) return st;
      if (std::chrono::steady_clock::now() > deadline) {
        ex->stop(id, std::chrono::milliseconds(0));
        ADD_FAILURE() << "the gang of " << id << " did not end in 60 s";
        return st;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::string log(const std::string& id, int rank) {
    return slurp(dir.path() + "/jobs/" + id + "/logs/rank-" + std::to_string(rank) + ".log");
  }
};

}  // namespace

TEST(LocalLaunch, ARankStartsInItsJobDirectoryWithNoStdinItsLogAsOutputAndTheGangsGroup) {
  Launcher l(
      "#!/bin/sh\n"
      "echo \"dir=$(pwd)\"\n"
      "if read -r line; then echo \"stdin=$line\"; else echo stdin=eof; fi\n"
      "echo \"pgid=$(cut -d' ' -f5 /proc/$$/stat) rank=$RANK\"\n"
      "echo to-stderr >&2\n");
  const controller::GangStatus st = l.run("j1", 2);
  EXPECT_EQ(st.phase, controller::GangPhase::kSucceeded) << st.message;
  const std::string r0 = l.log("j1", 0), r1 = l.log("j1", 1);
  EXPECT_NE(r0.find("dir=" + l.dir.path() + "/jobs/j1\n"), std::string::npos) << r0;
  EXPECT_NE(r0.find("stdin=eof\n"), std::string::npos) << r0;
  EXPECT_NE(r0.find("to-stderr\n"), std::string::npos) << r0;
  // Both ranks in one group: the first rank's.
  auto pgid_of = [](const std::string& log) {
    const auto at = log.find("pgid=");
    return at == std::string::npos ? std::string() : log.substr(at + 5, log.find(' ', at) - at - 5);
  };
  ASSERT_FALSE(pgid_of(r0).empty()) << r0;
  EXPECT_EQ(pgid_of(r0), pgid_of(r1)) << r0 << r1;
  EXPECT_NE(pgid_of(r0), std::to_string(::getpgrp())) << "a rank stayed in the controller's group";
  EXPECT_NE(r1.find("rank=1\n"), std::string::npos) << r1;
}

TEST(LocalLaunch, AWorkerThatCannotBeExecutedFailsTheStartNamingTheError) {
  Launcher l("#!/bin/sh\nexit 0\n");
  ::chmod(l.dir.file("worker.sh").c_str(), 0644);
  controller::GangSpec g;
  g.job_id = "j2";
  g.spec.nodes = 1;
  g.spec.procs_per_node = 1;
  g.spec.worker = nlohmann::json::object();
  try {
    l.ex->start(g);
    FAIL() << "start() of a worker without execute permission returned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Permission denied"), std::string::npos) << e.what();
  }
}

TEST(LocalLaunch, AHandlerTheControllerInstalledStillRunsInTheControllerAfterALaunch) {
  static volatile sig_atomic_t got = 0;
  struct sigaction sa {};
  sa.sa_handler = [](int) { got = 1; };
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);
  // The rank signals itself and ends by it: it starts with the defaults.
  Launcher l("#!/bin/sh\nkill -USR1 $$\necho survived\n");
  const controller::GangStatus st = l.run("j3");
  EXPECT_EQ(st.phase, controller::GangPhase::kFailed) << st.message;
  EXPECT_EQ(l.log("j3", 0).find("survived"), std::string::npos) << l.log("j3", 0);
  ::raise(SIGUSR1);
  EXPECT_EQ(got, 1) << "the controller's handler no longer runs after a launch";
  ::sigaction(SIGUSR1, &old, nullptr);
}
