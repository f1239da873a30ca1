// Test helpers: real rank processes on loopback, free ports, temp dirs.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace gstest {

// A TCP port that was free a moment ago (bind to port 0 on 127.0.0.1).
int free_port();
// The first of `n` consecutive loopback ports that were all free (a gang's
// metrics: rank r listens on port + r).
int free_port_run(int n);

// Path of the running executable (/proc/self/exe).
std::string self_exe();

struct RankResult {
  int rank = -1;
  int exit_code = -1;       // -1 when killed by a signal or timed out
  int signal = 0;           // terminating signal, 0 if none
  bool timed_out = false;   // we killed it at the deadline
  double seconds = 0;       // wall time until it ended
  std::string output;       // stdout + stderr
};

struct SpawnOptions {
  int world_size = 2;
  int local_world_size = -1;  // -1: = world_size
  std::chrono::seconds timeout{120};
  std::map<std::string, std::string> env;        // extra env for every rank
  std::map<int, std::map<std::string, std::string>> rank_env;  // per rank
  bool set_torchrun_env = true;  // MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_*
};

// Starts world_size processes of argv (argv[0] = program path) with the
// torchrun environment on a fresh free port, waits for all of them, kills
// every one still running at the deadline (whole process group). Never leaves
// a process behind.
std::vector<RankResult> run_ranks(const std::vector<std::string>& argv,
                                  const SpawnOptions& options);

// Runs one process and waits (same semantics, no torchrun env unless given).
RankResult run_process(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env,
                       std::chrono::seconds timeout);

// One process running in the background (own process group, output to a
// temp file). The destructor kills whatever is left of it.
class Background {
 public:
  Background(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  int pid() const;
  bool running() const;
  void signal(int sig);  // to the whole process group
  // Waits for the exit (kills it at the deadline) and collects the output.
  RankResult wait(std::chrono::seconds timeout);

 private:
  struct Impl;
  Impl* impl_;
};

// Children of `pid` (from /proc), e.g. the ranks a launcher started.
std::vector<int> child_pids(int pid);

// A table row's sentence as a GoogleTest name: every non-alphanumeric
// character becomes '_'.
std::string test_name(const char* sentence);

// mkdtemp under $TMPDIR; removed recursively in the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace gstest
