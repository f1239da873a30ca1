#include "shard/launch.h"
#include "shard/rank_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <stdexcept>
#include <system_error>

namespace shard {

int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    close(fd);
    throw std::system_error(err, std::generic_category(), "bind 127.0.0.1:0");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

namespace {
// The ranks of the running launch, for signal forwarding.
constexpr int kMaxForward = 1024;
std::atomic<pid_t> g_forward[kMaxForward];
std::atomic<int> g_forward_count{0};

void forward_signal(int sig) {
  const int n = g_forward_count.load();
  for (int i = 0; i < n; ++i)
    if (pid_t p = g_forward[i].load()) kill(-p, sig);
}
}  // namespace

LocalLaunchResult launch_local(const std::vector<std::string>& argv, const LocalLaunchOptions& o) {
  if (o.nproc < 1) throw std::invalid_argument("launch_local: nproc must be >= 1");
  if (argv.empty()) throw std::invalid_argument("launch_local: empty argv");
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw std::invalid_argument("launch_local: node_rank must be in [0, nnodes)");
  // Every rank's variables, built before fork (the child only sets them).
  RendezvousInfo info;
  info.master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  info.master_port = o.master_addr.empty() ? free_loopback_port() : o.master_port;
  info.world_size = o.nnodes * o.nproc;
  info.local_world_size = o.nproc;
  std::vector<std::vector<std::pair<std::string, std::string>>> envs;
  for (int r = 0; r < o.nproc; ++r) {
    info.rank = o.node_rank * o.nproc + r;
    info.local_rank = r;
    envs.push_back(rank_env(info));
  }
  int fds[2] = {-1, -1};
  if (o.capture_rank0_stdout && pipe(fds) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<pid_t> pids;
  const pid_t parent = getpid();
  auto kill_all = [&] {
    for (pid_t p : pids) kill(-p, SIGKILL);
  };
  for (int r = 0; r < o.nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      int err = errno;
      kill_all();
      throw std::system_error(err, std::generic_category(), "fork");
    }
    if (pid == 0) {
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      for (const auto& [k, v] : envs[r]) setenv(k.c_str(), v.c_str(), 1);
      for (const auto& [k, v] : o.env) setenv(k.c_str(), v.c_str(), 1);
      if (o.capture_rank0_stdout) {
        if (r == 0) dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
      }
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    setpgid(pid, pid);
    pids.push_back(pid);
    if (o.forward_signals && r < kMaxForward) {
      g_forward[r].store(pid);
      g_forward_count.store(r + 1);
    }
  }
  if (o.forward_signals) {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
  }
  LocalLaunchResult res;
  // Reading rank 0's output must not outlive the deadline: a watchdog kills
  // the ranks, which closes the pipe.
  std::thread watchdog;
  bool finished = false;
  std::mutex mu;
  std::condition_variable cv;
  if (o.timeout.count() > 0) {
    watchdog = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, o.timeout, [&] { return finished; })) {
        res.timed_out = true;
        kill_all();
      }
    });
  }
  if (o.capture_rank0_stdout) {
    close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) res.rank0_stdout.append(buf, static_cast<size_t>(n));
    close(fds[0]);
  }
  res.ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    res.exit_codes.push_back(code);
    res.ok = res.ok && code == 0;
  }
  if (watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
    watchdog.join();
  }
  res.ok = res.ok && !res.timed_out;
  if (o.forward_signals) g_forward_count.store(0);
  return res;
}

}  // namespace shard
