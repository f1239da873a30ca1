// Test helpers: rank processes on loopback (fork + execve, one process group
// each, output to an unlinked temp file), free ports, temp dirs.
#include "common/spawn.h"

#include "shard/rank_env.h"

#include <cctype>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gstest {
namespace {

using Clock = std::chrono::steady_clock;

std::string tmp_root() {
  const char* t = std::getenv("TMPDIR");
  return (t && *t) ? t : "/tmp";
}

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("gstest: " + what + ": " + std::strerror(errno));
}

// The parent environment, minus the torchrun variables when `strip`, with
// `extra` applied on top.
std::vector<std::string> make_env(bool strip,
                                  const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (strip) {
    for (const char* v : shard::kRankEnvVars) env.erase(v);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  Clock::time_point start;
  RankResult result;
  bool done = false;
};

// Starts argv with env; stdout+stderr go to an unlinked temp file.
Child start_child(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, int rank) {
  if (argv.empty()) throw std::invalid_argument("gstest: empty argv");
  Child c;
  c.result.rank = rank;
  std::string path = tmp_root() + "/gstest-out.XXXXXX";
  c.out_fd = mkstemp(path.data());
  if (c.out_fd < 0) throw sys_error("mkstemp " + path);
  unlink(path.c_str());

  // Everything the child needs is prepared before fork: after fork only
  // async-signal-safe calls are allowed (the parent has threads).
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t parent = getpid();
  const int fd = c.out_fd;

  c.start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(c.out_fd);
    throw sys_error("fork");
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the test process
    if (getppid() != parent) _exit(127);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd != STDOUT_FILENO && fd != STDERR_FILENO) close(fd);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      if (devnull != STDIN_FILENO) close(devnull);
    }
    execve(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "gstest: execve failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so it holds before kill(-pid)
  c.pid = pid;
  return c;
}

std::string read_all(int fd) {
  std::string out;
  if (lseek(fd, 0, SEEK_SET) < 0) return out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reaps `c` (already exited or killed), kills what is left of its process
// group, collects output.
void finish_child(Child& c, bool timed_out) {
  // The leader is a zombie until reaped, so its pgid cannot be reused yet.
  kill(-c.pid, SIGKILL);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.result.seconds = std::chrono::duration<double>(Clock::now() - c.start).count();
  c.result.timed_out = timed_out;
  if (timed_out) {
    c.result.exit_code = -1;
    c.result.signal = SIGKILL;
  } else if (WIFEXITED(status)) {
    c.result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    c.result.exit_code = -1;
    c.result.signal = WTERMSIG(status);
  }
  c.result.output = read_all(c.out_fd);
  close(c.out_fd);
  c.out_fd = -1;
  c.done = true;
}

std::vector<RankResult> wait_all(std::vector<Child>& children,
                                 std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t left = children.size();
  while (left > 0) {
    for (auto& c : children) {
      if (c.done) continue;
      siginfo_t info{};
      // WNOWAIT: observe the exit without reaping (see finish_child).
      int rv = waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rv == 0 && info.si_pid == c.pid) {
        finish_child(c, false);
        --left;
      } else if (rv < 0 && errno != EINTR) {
        finish_child(c, false);
        --left;
      }
    }
    if (left == 0) break;
    if (Clock::now() >= deadline) {
      for (auto& c : children) {
        if (!c.done) finish_child(c, true);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<RankResult> out;
  for (auto& c : children) out.push_back(std::move(c.result));
  return out;
}

}  // namespace

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw sys_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    throw sys_error("bind");
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw sys_error("getsockname");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

int free_port_run(int n) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int base = free_port();
    if (base + n > 65535) continue;
    bool ok = true;
    for (int k = 1; k < n && ok; ++k) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(base + k));
      ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      if (fd >= 0) close(fd);
    }
    if (ok) return base;
  }
  throw std::runtime_error("gstest: no run of " + std::to_string(n) + " free loopback ports");
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("gstest: readlink /proc/self/exe: " + ec.message());
  return p.string();
}

std::vector<RankResult> run_ranks(const std::vector<std::string>& argv,
                                  const SpawnOptions& options) {
  const int world = options.world_size;
  const int local_world = options.local_world_size > 0 ? options.local_world_size : world;
  if (world <= 0) throw std::invalid_argument("gstest: world_size must be positive");
  const int port = free_port();
  std::vector<Child> children;
  try {
    for (int r = 0; r < world; ++r) {
      std::map<std::string, std::string> extra = options.env;
      if (options.set_torchrun_env) {
        shard::RendezvousInfo where{"127.0.0.1", port, r, world, r % local_world, local_world};
        for (auto& [k, v] : shard::rank_env(where)) extra[k] = v;
      }
      if (auto it = options.rank_env.find(r); it != options.rank_env.end()) {
        for (const auto& [k, v] : it->second) extra[k] = v;
      }
      children.push_back(start_child(argv, make_env(true, extra), r));
    }
  } catch (...) {
    for (auto& c : children) finish_child(c, true);
    throw;
  }
  return wait_all(children, options.timeout);
}

RankResult run_process(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       std::chrono::seconds timeout) {
  std::vector<Child> children;
  children.push_back(start_child(argv, make_env(true, env), 0));
  return wait_all(children, timeout).front();
}

struct Background::Impl {
  std::vector<Child> children;
  std::optional<RankResult> result;
};

Background::Background(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env)
    : impl_(new Impl) {
  impl_->children.push_back(start_child(argv, make_env(true, env), 0));
}

Background::~Background() {
  if (!impl_->result) wait(std::chrono::seconds(0));
  delete impl_;
}

int Background::pid() const { return impl_->children.front().pid; }

bool Background::running() const {
  if (impl_->result) return false;
  siginfo_t info{};
  const pid_t p = impl_->children.front().pid;
  int rv = waitid(P_PID, static_cast<id_t>(p), &info, WEXITED | WNOHANG | WNOWAIT);
  return !(rv == 0 && info.si_pid == p);
}

void Background::signal(int sig) {
  if (!impl_->result) kill(-impl_->children.front().pid, sig);
}

RankResult Background::wait(std::chrono::seconds timeout) {
  if (!impl_->result) impl_->result = wait_all(impl_->children, timeout).front();
  return *impl_->result;
}

std::vector<int> child_pids(int pid) {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    FILE* f = std::fopen((e.path() / "stat").c_str(), "r");
    if (!f) continue;
    int self = 0, ppid = 0;
    char comm[256];
    char state = 0;
    if (std::fscanf(f, "%d (%255[^)]) %c %d", &self, comm, &state, &ppid) == 4 && ppid == pid) out.push_back(self);
    std::fclose(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TempDir::TempDir() {
  std::string tmpl = tmp_root() + "/gstest.XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw sys_error("mkdtemp " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string test_name(const char* sentence) {
  std::string s;
  for (const char* p = sentence; *p; ++p) s += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return s;
}

}  // namespace gstest
