// S3Server: s3rver (tests/shard/s3rver_run.mjs) as a child process. See s3_server.h.
#include "shard/s3_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#ifndef GS_SOURCE_DIR
#error "GS_SOURCE_DIR (the repository root) must be defined"
#endif

extern char** environ;

namespace gstest {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr const char* kKey = "S3RVER";  // s3rver's built-in account

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_executable(const std::string& p) { return is_file(p) && ::access(p.c_str(), X_OK) == 0; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("S3Server: " + what + ": " + std::strerror(errno));
}

}  // namespace

std::string S3Server::node() {
  const std::string explicit_node = env_or("NODE", "");
  if (!explicit_node.empty()) {
    if (explicit_node.find('/') != std::string::npos) return is_executable(explicit_node) ? explicit_node : "";
  }
  const std::string name = explicit_node.empty() ? "node" : explicit_node;
  std::stringstream path(env_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
  std::string dir;
  while (std::getline(path, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (is_executable(candidate)) return candidate;
  }
  return "";
}

std::string S3Server::tools_dir() {
  const std::string s3 = env_or("GREENSHARD_S3_TOOLS", "");
  if (!s3.empty()) return s3;
  return env_or("GREENSHARD_TOOLS_DIR", std::string(GS_SOURCE_DIR) + "/.tools") + "/s3";
}

std::string S3Server::script(const std::string& name) { return std::string(GS_SOURCE_DIR) + "/tests/shard/" + name; }

std::string S3Server::unavailable_reason() {
  std::string why;
  if (node().empty()) why += "node is not on PATH (nor $NODE); ";
  const std::string mods = tools_dir() + "/node_modules/";
  for (const char* pkg : {"s3rver", "@aws-sdk/client-s3"}) {
    if (!is_file(mods + pkg + "/package.json")) why += std::string(pkg) + " is not installed in " + mods + "; ";
  }
  if (!is_file(script("s3rver_run.mjs"))) why += script("s3rver_run.mjs") + " is missing; ";
  if (why.empty()) return "";
  return why + "run: bash scripts/install_s3_tools.sh (scripts/setup.sh does)";
}

bool S3Server::available() { return unavailable_reason().empty(); }

S3Server::S3Server(const std::string& bucket) : bucket_(bucket) {
  const std::string why = unavailable_reason();
  if (!why.empty()) throw std::runtime_error("S3Server: cannot start s3rver: " + why);
  std::string tmpl = env_or("TMPDIR", "/tmp") + "/gs-s3rver-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) throw sys_error("mkdtemp " + tmpl);
  tmp_ = buf.data();
  try {
    std::filesystem::create_directories(tmp_ + "/data");
    start(0);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
    throw;
  }
}

S3Server::~S3Server() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(tmp_, ec);
}

std::string S3Server::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
int S3Server::port() const { return port_; }
std::string S3Server::bucket() const { return bucket_; }
std::string S3Server::dir() const { return tmp_ + "/data"; }
bool S3Server::running() const { return pid_ > 0; }
std::string S3Server::log() const { return read_file(tmp_ + "/server.log"); }

std::map<std::string, std::string> S3Server::env() const {
  return {{"AWS_ENDPOINT_URL_S3", endpoint()},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ACCESS_KEY_ID", kKey},
          {"AWS_SECRET_ACCESS_KEY", kKey},
          {"GREENSHARD_S3_TOOLS", tools_dir()}};
}

void S3Server::stop() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);  // its process group
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);
    stdin_fd_ = -1;
  }
}

void S3Server::restart() {
  stop();
  start(port_);
}

void S3Server::start(int port) {
  // Everything the child needs is built before fork (no allocation after it).
  const std::string node_bin = node();
  std::vector<std::string> args = {node_bin,  script("s3rver_run.mjs"), "--dir", dir(), "--port", std::to_string(port),
                                   "--bucket", bucket_, "--exit-on-stdin-eof"};
  std::vector<std::string> envs;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "GREENSHARD_S3_TOOLS=", 20) != 0) envs.emplace_back(*e);
  }
  envs.push_back("GREENSHARD_S3_TOOLS=" + tools_dir());
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw sys_error("pipe2");
  if (::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw sys_error("pipe2");
  }
  const std::string log_path = tmp_ + "/server.log";
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    for (int fd : {out[0], out[1], in[0], in[1]}) ::close(fd);
    throw sys_error("open " + log_path);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], in[0], in[1], log_fd}) ::close(fd);
    throw sys_error("fork");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // die with the test process
    if (::getppid() != parent) ::_exit(1);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(log_fd, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(in[0]);
  ::close(out[1]);
  ::close(log_fd);
  pid_ = pid;
  stdin_fd_ = in[1];

  // Wait for "PORT <n>".
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  std::string failure;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure = "no PORT line within " + std::to_string(kStartTimeout.count()) + " s";
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      failure = std::string("poll: ") + std::strerror(errno);
      break;
    }
    if (r == 0) continue;
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure = "it exited before printing its port";
      break;
    }
    line.append(buf, static_cast<size_t>(n));
    size_t nl = line.find('\n');
    if (nl == std::string::npos) continue;
    const std::string first = line.substr(0, nl);
    int got = 0;
    if (std::sscanf(first.c_str(), "PORT %d", &got) == 1 && got > 0 && (port == 0 || got == port)) {
      port_ = got;
      ::close(out[0]);  // it prints nothing more
      return;
    }
    failure = "unexpected first line \"" + first + "\"";
    break;
  }
  ::close(out[0]);
  stop();
  throw std::runtime_error("S3Server: s3rver did not start on 127.0.0.1:" + std::to_string(port) + ": " + failure +
                           "; its stderr:\n" + log());
}

}  // namespace gstest
