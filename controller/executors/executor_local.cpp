// Local executor: the gang as greenshard-worker processes on this host.
//
// Layout per job: <data_dir>/jobs/<id>/{job.json, summary.json, ckpt/,
// logs/rank-<r>.log}. Every rank of a gang is in one process group (the
// first rank's pid), so signals reach the whole gang; each rank gets
// PR_SET_PDEATHSIG(SIGTERM), so if the controller dies the gang checkpoints
// and exits instead of running unwatched; the restarted controller then
// restarts it from that checkpoint (adopt() returns false).
//
// Ranks inherit the controller's environment. GREENSHARD_CA_BUNDLE (the PEM
// bundle an https:// controller is verified with; worker/status.h) is
// checked when the executor is made and handed to the ranks as an absolute
// path (they run in their job directory).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "worker/spec/ca_bundle.h"
#include "controller/executors/executor_local.h"
#include "worker/spec/job_spec.h"  // kConfigErrorPrefix
#include "worker/spec/shard_vocabulary.h"  // rank_env

extern char** environ;

namespace controller {

std::string_view to_string(GangPhase p) {
  switch (p) {
    case GangPhase::kStarting: return "starting";
    case GangPhase::kRunning: return "running";
    case GangPhase::kSucceeded: return "succeeded";
    case GangPhase::kPreempted: return "preempted";
    case GangPhase::kConfigError: return "config-error";
    case GangPhase::kFailed: return "failed";
    case GangPhase::kUnknown: return "unknown";
  }
  return "unknown";
}

namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// One rank's launch: what the child does between clone and execve.
struct RankLaunch {
  pid_t pgid;    // the gang's group (<= 0: a new group led by this rank)
  pid_t parent;  // the controller
  int log_fd;    // stdout and stderr
  const char* dir;
  char** argv;
  char** envp;
  // Set by the child when it cannot start the worker (chdir or execve
  // failed), before it exits. The child shares this memory until execve, and
  // clone(CLONE_VFORK) returns only after the execve or the exit, so the
  // parent reads it safely after spawn_rank (as glibc's posix_spawn does).
  int exec_errno = 0;
};

// The child runs on its own small stack in the parent's address space, on
// the parent thread's TLS, until execve: so it makes its system calls
// directly (syscall(2)), never through libc wrappers that a sanitizer
// interposes, and is itself not instrumented. A sanitizer's interceptor or
// instrumentation would do the parent thread's bookkeeping from the child,
// in the memory they share: under TSan the child's sigaction, open and
// dup2 interceptors and its never-returning function entry ran on the
// scheduler thread's state, and TSan then reported the store's group commit
// as racing with that thread (docs/reliability.md). No allocation, no
// locks, no errno of its own but the one it reports.
struct KernelSigaction {  // the kernel's struct sigaction (x86-64, arm64)
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  uint64_t mask;
};
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "rank_child: the kernel's struct sigaction is laid out for x86-64 and arm64 only"
#endif

[[noreturn]] __attribute__((no_sanitize("address", "thread", "undefined"))) void child_exit(int code) {
  for (;;) ::syscall(SYS_exit_group, code);
}

__attribute__((no_sanitize("address", "thread", "undefined"))) int rank_child(void* p) {
  RankLaunch& a = *static_cast<RankLaunch*>(p);
  // Handlers the parent installed would run in its memory: back to the
  // default before any signal is unblocked (execve resets them anyway).
  for (int sig = 1; sig < NSIG; ++sig) {
    KernelSigaction sa{};
    if (::syscall(SYS_rt_sigaction, sig, nullptr, &sa, sizeof sa.mask) != 0) continue;
    if (sa.handler == SIG_IGN || sa.handler == SIG_DFL) continue;
    KernelSigaction dfl{};
    dfl.handler = SIG_DFL;
    ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
  }
  ::syscall(SYS_setpgid, 0, a.pgid > 0 ? a.pgid : 0);
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
  if (::syscall(SYS_getppid) != a.parent) child_exit(125);
  const long devnull = ::syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull > 0) ::syscall(SYS_dup3, devnull, 0, 0);
  else if (devnull == 0) ::syscall(SYS_fcntl, 0, F_SETFD, 0);  // stdin was closed: /dev/null is it now
  ::syscall(SYS_dup3, a.log_fd, 1, 0);
  ::syscall(SYS_dup3, a.log_fd, 2, 0);
  if (::syscall(SYS_chdir, a.dir) != 0) {
    a.exec_errno = errno;
    child_exit(126);
  }
  const uint64_t none = 0;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, sizeof none);
  ::syscall(SYS_execve, a.argv[0], a.argv, a.envp);
  a.exec_errno = errno;
  const char msg[] = "greenshard: cannot execute the worker\n";
  (void)::syscall(SYS_write, 2, msg, sizeof msg - 1);
  child_exit(127);
}

// libc's own clone, not one a sanitizer interposes: TSan's assumes fork's
// copy of memory and re-initialises its runtime in the child, which here
// would be the parent's runtime. Looked up once, in libc itself.
using CloneFn = int (*)(int (*)(void*), void*, int, void*, ...);
CloneFn libc_clone() {
  static const CloneFn fn = [] {
    void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void* sym = libc ? ::dlsym(libc, "clone") : nullptr;
    if (libc) ::dlclose(libc);  // RTLD_NOLOAD took a reference; libc stays loaded
    return sym ? reinterpret_cast<CloneFn>(sym) : &::clone;
  }();
  return fn;
}

// Starts a rank as posix_spawn does (clone with CLONE_VM | CLONE_VFORK):
// the child shares the controller's memory until its execve, so nothing is
// copied. A fork() of a controller holding tens of thousands of jobs
// copied its page tables and then made every thread copy-on-write fault
// (with a TLB shootdown) on each page it next wrote: that took more time
// than the scheduling itself under load. Returns the pid, or -1 (errno).
// A child that could not execute the worker has exited by the time this
// returns, with a.exec_errno set: the caller reaps it and fails the launch.
pid_t spawn_rank(RankLaunch& a) {
  constexpr size_t kStack = 64 * 1024;
  std::unique_ptr<char[]> stack(new char[kStack]);
  // No signal is delivered to the child before it resets the handlers.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = libc_clone()(rank_child, stack.get() + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  const int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return pid;
}

int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind: " + std::string(std::strerror(errno)));
  }
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A base port with `n` consecutive free ports after it (worker rank r
// exports its metrics on base + r).
int pick_free_port_run(int n) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int base = pick_free_port();
    if (base + n > 65535) continue;
    bool ok = true;
    for (int k = 1; k < n && ok; ++k) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(base + k));
      ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      if (fd >= 0) ::close(fd);
    }
    if (ok) return base;
  }
  throw std::runtime_error("no run of free ports for the gang's metrics");
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

constexpr const char* kAttemptBanner = "=== greenshard: attempt ";

// The worker's configuration error (the last line of this attempt's log that
// starts with greenshard::kConfigErrorPrefix), without the prefix and at
// most 512 bytes; "" when there is none. Reads only the log's last 64 KiB.
std::string worker_config_error(const std::string& log_path) {
  constexpr std::streamoff kTail = 64 * 1024;
  constexpr size_t kMaxMessage = 512;
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - kTail);
  in.seekg(from);
  std::string text(size_t(size - from), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  // Earlier attempts' lines stay in the (appended) log: start at this one's banner.
  const size_t banner = text.rfind(kAttemptBanner);
  if (banner != std::string::npos) text.erase(0, banner);
  return greenshard::config_error_in(text, kMaxMessage);
}

struct Rank {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
};

struct Gang {
  std::string dir;
  int metrics_port = 0;  // rank r: metrics_port + r
  int world = 0;
  std::string region;
  pid_t pgid = -1;
  std::vector<Rank> ranks;
  bool failed = false;       // a rank failed; the rest were killed
  std::string failure;
  bool stopping = false;
  SteadyClock::time_point kill_at{};
  bool killed = false;
};

// $GREENSHARD_CA_BUNDLE as an absolute path ("" when unset or empty);
// throws std::runtime_error naming the variable when it is set but not a
// readable PEM bundle.
std::string ca_bundle_for_ranks() {
  const char* v = std::getenv("GREENSHARD_CA_BUNDLE");
  if (!v || !*v) return "";
  greenshard::check_ca_bundle(v, "GREENSHARD_CA_BUNDLE (the CA bundle local ranks verify the controller's https:// URL with)");
  return fs::absolute(v).lexically_normal().string();
}

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(LocalExecutorOptions o) : opt_(std::move(o)), ca_bundle_(ca_bundle_for_ranks()) {}
  ~LocalExecutor() override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, g] : gangs_) {
      ::kill(-g.pgid, SIGKILL);
      for (auto& r : g.ranks)
        if (!r.exited) ::waitpid(r.pid, &r.status, 0);
    }
  }

  std::string kind() const override { return "local"; }

  GangStatus start(const GangSpec& gs) override {
    std::lock_guard<std::mutex> l(mu_);
    if (gangs_.count(gs.job_id)) throw std::runtime_error("gang " + gs.job_id + " is already running");
    Gang g;
    g.dir = job_dir(gs.job_id);
    fs::create_directories(g.dir + "/logs");
    fs::create_directories(g.dir + "/ckpt");
    {
      std::ofstream out(g.dir + "/job.json", std::ios::trunc);
      out << gs.spec.worker.dump(2) << "\n";
      if (!out) throw std::runtime_error("cannot write " + g.dir + "/job.json");
    }
    std::error_code ec;
    fs::remove(g.dir + "/summary.json", ec);
    const int world = gs.width() * gs.spec.procs_per_node;
    const int port = pick_free_port();

    std::map<std::string, std::string> base;
    for (char** e = environ; e && *e; ++e) {
      std::string kv(*e);
      auto eq = kv.find('=');
      if (eq != std::string::npos) base[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    // One host: every rank is local (rank_env sets all six per rank below).
    shard::RendezvousInfo where;
    where.master_addr = "127.0.0.1";
    where.master_port = port;
    where.world_size = world;
    where.local_world_size = world;
    base["GREENSHARD_JOB_ID"] = gs.job_id;
    base["GREENSHARD_CHECKPOINT_DIR"] = g.dir + "/ckpt";
    base["GREENSHARD_SUMMARY_PATH"] = g.dir + "/summary.json";
    g.metrics_port = pick_free_port_run(world);
    g.world = world;
    g.region = gs.region;
    base["GREENSHARD_METRICS_PORT"] = std::to_string(g.metrics_port);
    base["GREENSHARD_REGION"] = gs.region;
    base["GREENSHARD_GRID_INTENSITY"] = std::to_string(gs.intensity);
    base["GREENSHARD_PUE"] = std::to_string(gs.pue);
    base["GREENSHARD_STATUS_URL"] = gs.status_url;
    base["GREENSHARD_STATUS_TOKEN"] = gs.status_token;
    if (!gs.intensity_url.empty()) base["GREENSHARD_INTENSITY_URL"] = gs.intensity_url;
    if (!ca_bundle_.empty()) base["GREENSHARD_CA_BUNDLE"] = ca_bundle_;

    std::vector<std::string> argv_s = {opt_.worker_path, "--config", g.dir + "/job.json"};
    for (const auto& a : opt_.extra_args) argv_s.push_back(a);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);

    const pid_t parent = ::getpid();
    for (int r = 0; r < world; ++r) {
      auto env_map = base;
      where.rank = where.local_rank = r;
      for (auto& [k, v] : shard::rank_env(where)) env_map[k] = v;
      std::vector<std::string> env_s;
      for (auto& [k, v] : env_map) env_s.push_back(k + "=" + v);
      std::vector<char*> envp;
      for (auto& e : env_s) envp.push_back(e.data());
      envp.push_back(nullptr);
      std::string log = g.dir + "/logs/rank-" + std::to_string(r) + ".log";
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) {
        kill_and_reap(g);
        throw std::runtime_error("cannot open " + log + ": " + std::strerror(errno));
      }
      std::string banner = kAttemptBanner + std::to_string(gs.attempt) + ", rank " +
                           std::to_string(r) + "/" + std::to_string(world) + " ===\n";
      (void)!::write(fd, banner.data(), banner.size());
      RankLaunch rl{g.pgid, parent, fd, g.dir.c_str(), argv.data(), envp.data()};
      const pid_t pid = spawn_rank(rl);
      if (pid < 0) {
        const int err = errno;
        ::close(fd);
        kill_and_reap(g);
        throw std::runtime_error(std::string("clone: ") + std::strerror(err));
      }
      ::close(fd);
      if (rl.exec_errno != 0) {
        ::waitpid(pid, nullptr, 0);
        kill_and_reap(g);
        throw std::runtime_error("cannot execute the worker " + std::string(argv[0]) + ": " +
                                 std::strerror(rl.exec_errno));
      }
      if (g.pgid < 0) g.pgid = pid;
      ::setpgid(pid, g.pgid);
      g.ranks.push_back({pid});
    }
    GangStatus st;
    st.phase = GangPhase::kRunning;
    st.runtime = runtime_of(g);
    gangs_.emplace(gs.job_id, std::move(g));
    write_scrape_targets();
    return st;
  }

  GangStatus poll(const std::string& id) override {
    std::lock_guard<std::mutex> l(mu_);
    GangStatus st;
    auto it = gangs_.find(id);
    if (it == gangs_.end()) {
      st.phase = GangPhase::kUnknown;
      st.message = "no such gang on this host";
      return st;
    }
    Gang& g = it->second;
    advance(g);
    st.runtime = runtime_of(g);
    bool all = true;
    for (auto& r : g.ranks) all = all && r.exited;
    if (!all) {
      st.phase = GangPhase::kRunning;
      return st;
    }
    st.summary = read_summary(g.dir + "/summary.json");
    if (g.failed) {
      bool config = false;
      for (auto& r : g.ranks)
        if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2) config = true;
      st.phase = config ? GangPhase::kConfigError : GangPhase::kFailed;
      st.message = g.failure;
    } else {
      const bool preempted = st.summary && st.summary->state == greenshard::RunEnd::kPreempted;
      st.phase = preempted || g.stopping ? GangPhase::kPreempted : GangPhase::kSucceeded;
      st.message = "every rank exited 0" +
                   (st.summary ? " (summary: " + std::string(greenshard::to_string(st.summary->state)) + ")" : "");
    }
    gangs_.erase(it);
    write_scrape_targets();
    return st;
  }

  void stop(const std::string& id, std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = gangs_.find(id);
    if (it == gangs_.end() || it->second.stopping) return;
    it->second.stopping = true;
    it->second.kill_at = SteadyClock::now() + grace;
    ::kill(-it->second.pgid, SIGTERM);
  }

  void tick() override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, g] : gangs_) advance(g);
  }

  bool gone(const std::string& id) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = gangs_.find(id);
    if (it == gangs_.end()) return true;
    advance(it->second);
    for (auto& r : it->second.ranks)
      if (!r.exited) return false;
    if (it->second.stopping) {
      gangs_.erase(it);  // nobody will poll a stopped gang
      write_scrape_targets();
    }
    return true;
  }

  // <data_dir>/prometheus/local-jobs.json: the running gangs' metrics
  // endpoints in Prometheus' file_sd format (a file_sd_configs entry picks
  // them up as gangs come and go). Called with mu_ held.
  void write_scrape_targets() {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& [id, g] : gangs_) {
      if (g.metrics_port <= 0) continue;
      nlohmann::json targets = nlohmann::json::array();
      for (int r = 0; r < g.world; ++r) targets.push_back("127.0.0.1:" + std::to_string(g.metrics_port + r));
      groups.push_back({{"targets", targets}, {"labels", {{"greenshard_job", id}, {"greenshard_region", g.region}}}});
    }
    const std::string dir = opt_.data_dir + "/prometheus";
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string tmp = dir + "/local-jobs.json.tmp";
    std::ofstream(tmp, std::ios::trunc) << groups.dump(2) << "\n";
    fs::rename(tmp, dir + "/local-jobs.json", ec);
  }

  bool adopt(const std::string& id, const nlohmann::json& runtime, const AdoptOptions& o) override {
    // Processes of a previous controller are not our children: we cannot
    // wait for them, so we let them checkpoint (SIGTERM), then make sure
    // they are gone, and the scheduler restarts the gang from checkpoint.
    if (!runtime.is_object() || !runtime.contains("pgid")) return false;
    pid_t pgid = runtime.value("pgid", -1);
    if (pgid <= 1 || !is_our_gang(pgid, id)) return false;
    ::kill(-pgid, SIGTERM);
    auto deadline = SteadyClock::now() + o.grace;
    while (::kill(-pgid, 0) == 0 && SteadyClock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::kill(-pgid, SIGKILL);
    return false;
  }

  std::optional<std::string> logs(const std::string& id, int rank, int64_t offset,
                                  int64_t max_bytes) override {
    std::string path = job_dir(id) + "/logs/rank-" + std::to_string(rank) + ".log";
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    in.seekg(0, std::ios::end);
    int64_t size = in.tellg();
    if (offset >= size) return std::string();
    in.seekg(offset);
    std::string out(size_t(std::min(max_bytes, size - offset)), '\0');
    in.read(out.data(), std::streamsize(out.size()));
    out.resize(size_t(in.gcount()));
    return out;
  }

 private:
  std::string job_dir(const std::string& id) const { return opt_.data_dir + "/jobs/" + id; }

  static nlohmann::json runtime_of(const Gang& g) {
    nlohmann::json pids = nlohmann::json::array();
    for (auto& r : g.ranks) pids.push_back(r.pid);
    return {{"executor", "local"}, {"pgid", g.pgid}, {"pids", pids}, {"dir", g.dir}};
  }

  // The worker's summary.json; nullopt when there is none, or none that
  // read_run_summary accepts.
  static std::optional<greenshard::RunSummary> read_summary(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    // One byte past the limit is enough to refuse a file that is too long.
    std::string text(greenshard::kMaxRunSummaryBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    return greenshard::parse_run_summary(text, nullptr);
  }

  static bool is_our_gang(pid_t pid, const std::string& id) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    if (!in) return false;
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return env.find(std::string("GREENSHARD_JOB_ID=") + id + '\0') != std::string::npos;
  }

  // Reaps exited ranks; a failed rank takes the gang down; overdue stops
  // are escalated to SIGKILL.
  static void advance(Gang& g) {
    for (size_t r = 0; r < g.ranks.size(); ++r) {
      Rank& k = g.ranks[r];
      if (k.exited) continue;
      pid_t got = ::waitpid(k.pid, &k.status, WNOHANG);
      if (got == k.pid || (got < 0 && errno == ECHILD)) {
        k.exited = true;
        bool ok = WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0;
        if (!ok && !g.failed && !(g.stopping && WIFSIGNALED(k.status))) {
          g.failed = true;
          g.failure = "rank " + std::to_string(r) + " failed: " + describe(k.status);
          // Exit 2: the worker rejected its configuration; say why in its words.
          if (WIFEXITED(k.status) && WEXITSTATUS(k.status) == 2) {
            const std::string why = worker_config_error(g.dir + "/logs/rank-" + std::to_string(r) + ".log");
            if (!why.empty()) g.failure = "rank " + std::to_string(r) + ": " + why;
          }
          ::kill(-g.pgid, SIGKILL);
        }
      }
    }
    if (g.stopping && !g.killed && SteadyClock::now() >= g.kill_at) {
      g.killed = true;
      ::kill(-g.pgid, SIGKILL);
    }
  }

  static void kill_and_reap(Gang& g) {
    if (g.pgid > 0) ::kill(-g.pgid, SIGKILL);
    for (auto& r : g.ranks) ::waitpid(r.pid, &r.status, 0);
  }

  LocalExecutorOptions opt_;
  std::string ca_bundle_;  // GREENSHARD_CA_BUNDLE, absolute; "" = none
  std::mutex mu_;
  std::map<std::string, Gang> gangs_;
};

}  // namespace

std::unique_ptr<Executor> make_local_executor(const LocalExecutorOptions& options) {
  return std::make_unique<LocalExecutor>(options);
}

}  // namespace controller
