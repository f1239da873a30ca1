// A greenshard-controller process for tests: its own process group, output
// to a file, the bound port read from --port-file; SIGKILLed (the whole
// group) by the destructor so nothing outlives the test. `env`: variables
// set for the controller on top of the test's environment.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ctltest {

class ControllerProcess {
 public:
  ControllerProcess(const std::string& binary, std::vector<std::string> args, const std::string& log_path,
                    const std::string& port_file, const std::map<std::string, std::string>& env = {})
      : port_file_(port_file), log_(log_path) {
    ::unlink(port_file.c_str());
    args.insert(args.begin(), binary);
    args.push_back("--port-file");
    args.push_back(port_file);
    // The environment is built before fork: the child only calls
    // async-signal-safe functions.
    std::map<std::string, std::string> vars;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      const auto eq = kv.find('=');
      if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) vars[k] = v;
    std::vector<std::string> env_s;
    for (const auto& [k, v] : vars) env_s.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
  }
  ~ControllerProcess() { kill(SIGKILL); }

  // Waits until the port file appears (bounded by a count of 10 ms polls).
  int port(int max_polls = 3000) {
    for (int i = 0; i < max_polls; ++i) {
      std::ifstream in(port_file_);
      int p = 0;
      if (in >> p && p > 0) return p;
      int st;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("controller exited early:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("controller did not start:\n" + log());
  }

  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(-pid_, sig);
    ::kill(pid_, sig);
    int st;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }
  // SIGKILLs only the controller (not its worker children) and reaps it.
  void kill_controller_only() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  pid_t pid() const { return pid_; }

 private:
  std::string port_file_, log_;
  pid_t pid_ = -1;
};

}  // namespace ctltest
