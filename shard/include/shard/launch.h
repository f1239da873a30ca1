// Local launcher: start N ranks of a program on this machine with the
// torchrun environment (like `torchrun --standalone`), for the worker's
// --nproc and the benchmarks. Tests use tests/common/spawn.h, which also
// captures every rank's output and enforces deadlines.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace shard {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
int free_loopback_port();

struct LocalLaunchOptions {
  int nproc = 2;
  std::map<std::string, std::string> env;  // extra variables for every rank
  bool capture_rank0_stdout = false;
  // Kill every rank still running after this long (0 = wait forever).
  std::chrono::seconds timeout{0};
  // Multi-node (one launcher per node, as torchrun --nnodes): ranks are
  // node_rank * nproc + local rank of nnodes * nproc, and meet at
  // master_addr:master_port. Empty master_addr: 127.0.0.1 and a free port.
  std::string master_addr;
  int master_port = 0;
  int node_rank = 0;
  int nnodes = 1;
  // Forward SIGTERM/SIGINT received by the launcher to every rank (a pod's
  // main process gets Kubernetes' SIGTERM).
  bool forward_signals = false;
};

struct LocalLaunchResult {
  bool ok = false;                // every rank exited 0
  std::vector<int> exit_codes;    // per rank; -signal when killed
  std::string rank0_stdout;       // when captured
  bool timed_out = false;
};

// Runs argv (argv[0] = program path; "/proc/self/exe" re-runs this program)
// as ranks 0..nproc-1 with MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and waits for all of them. Each
// rank runs in its own process group and dies with the launcher.
LocalLaunchResult launch_local(const std::vector<std::string>& argv, const LocalLaunchOptions& options);

}  // namespace shard
