// Slow and lossy links (issue 34): real greenshard-worker ranks in a private
// network namespace whose loopback is degraded by the kernel's own traffic
// control and packet filter.
//
// The test binary re-executes itself inside
//   unshare --user --map-root-user --net --pid --fork --kill-child --mount-proc
// as a "namespace driver" (--netns-driver): PID 1 of a fresh PID namespace in
// a fresh network namespace, where it is root over that namespace only. It
// brings lo up, degrades it, starts the two ranks (torchrun environment, on
// the namespace's loopback), waits for them under a hang detector and writes
// what happened to a JSON file the test reads. When the driver ends, the
// kernel kills everything left in its PID namespace, and the network
// namespace goes with its last process: nothing is left behind.
//
// The bad link: `tc qdisc ... netem delay 20ms loss 2%` where the kernel has
// sch_netem. Where it does not (the Firecracker VM kernel this project is
// tested on is built without it and without modules), the parts the kernel
// has: a token-bucket rate limit (`tc qdisc ... tbf`, a slow link that queues)
// with a 1500-byte MTU, and 2 % random loss of every packet on lo (iptables
// `-m statistic --mode random --probability 0.02 -j DROP`). The test prints
// which one it used and why.
//
// The cut link: mid-run (once the step-5 checkpoint is DONE), every TCP
// packet from or to any port rank 1 holds is dropped (iptables), i.e. 100 %
// loss to that rank. Nothing resets the connections, so only the collective
// deadline (sharding.timeout_s) can end the waits.
#include "common/spawn.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kWorker = GS_WORKER_BIN;
const std::string kText = "/usr/share/common-licenses/GPL-3";  // real English text, always on Debian
constexpr int kCutTimeoutS = 10;  // the collective deadline of the cut run

// ---------------------------------------------------------------------------
// Inside the namespace.

struct Sh {
  int rc = -1;
  std::string out;
};

// `cmd` under sh, stdout+stderr captured.
Sh sh(const std::string& cmd) {
  Sh r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The rank (RANK=...) of a process from its environment, -1 if none.
int rank_of(int pid) {
  const std::string env = read_file("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream in(env);
  std::string kv;
  while (std::getline(in, kv, '\0'))
    if (kv.rfind("RANK=", 0) == 0) return std::atoi(kv.c_str() + 5);
  return -1;
}

// Local TCP ports of every socket `pid` holds (its fds matched to the
// namespace's /proc/net/tcp{,6} by inode).
std::set<int> tcp_ports_of(int pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const std::string link = fs::read_symlink(e.path(), ec).string();
    if (!ec && link.rfind("socket:[", 0) == 0) inodes.insert(link.substr(8, link.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(read_file(table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, txrx, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> txrx >> tr >> retr >> uid >> timeout >> inode;
      if (!inodes.count(inode)) continue;
      const auto colon = local.rfind(':');
      if (colon != std::string::npos) ports.insert(std::stoi(local.substr(colon + 1), nullptr, 16));
    }
  }
  return ports;
}

// argv: self --netns-driver MODE RESULT_JSON CKPT_DIR -- WORKER_ARGV...
// MODE: clean | bad | cut.
int netns_driver(int argc, char** argv) {
  const std::string mode = argv[2], result_path = argv[3], ckpt = argv[4];
  std::vector<std::string> worker;
  for (int i = 6; i < argc; ++i) worker.push_back(argv[i]);
  ::setenv("PATH", ("/usr/sbin:/sbin:" + std::string(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin")).c_str(), 1);
  json res;
  res["mode"] = mode;
  res["pid_in_namespace"] = static_cast<int>(getpid());
  auto must = [&](const std::string& cmd) {
    auto r = sh(cmd);
    res["setup"].push_back(json{{"cmd", cmd}, {"rc", r.rc}, {"out", r.out}});
    if (r.rc != 0) throw std::runtime_error("`" + cmd + "` failed (" + std::to_string(r.rc) + "): " + r.out);
  };
  try {
    must("ip link set lo up");
    if (mode == "bad") {
      const auto netem = sh("tc qdisc add dev lo root netem delay 20ms loss 2%");
      if (netem.rc == 0) {
        res["link"] = "netem";
        res["link_text"] = "tc netem delay 20ms loss 2% on lo";
      } else {
        res["link"] = "tbf+iptables";
        res["netem_error"] = netem.out;
        must("ip link set lo mtu 1500");
        must("tc qdisc add dev lo root tbf rate 20mbit burst 32kb latency 400ms");
        must("iptables -A INPUT -i lo -m statistic --mode random --probability 0.02 -j DROP");
        res["link_text"] =
            "netem is not available in this kernel (tc: " + netem.out.substr(0, netem.out.find('\n')) +
            "); used instead: lo MTU 1500, tc tbf rate 20mbit burst 32kb latency 400ms (slow link), "
            "iptables statistic random DROP with probability 0.02 on every lo packet (2 % loss)";
      }
    }
    gstest::SpawnOptions so;
    so.world_size = 2;
    so.timeout = 240s;  // hang detector: far above any deadline used here
    so.env = {{"OMP_NUM_THREADS", "1"}};
    std::atomic<bool> ranks_done{false};
    std::thread cutter;
    if (mode == "cut") {
      cutter = std::thread([&] {
        const fs::path done = fs::path(ckpt) / "step_00000005" / "DONE";
        while (!ranks_done.load() && !fs::exists(done)) std::this_thread::sleep_for(5ms);
        if (ranks_done.load()) return;
        json cut;
        int victim = -1;
        std::vector<int> ranks;
        for (int pid : gstest::child_pids(getpid())) {
          const int r = rank_of(pid);
          if (r >= 0) ranks.push_back(r);
          if (r == 1) victim = pid;
        }
        cut["ranks_running"] = ranks.size();
        cut["rank1_pid"] = victim;
        std::set<int> ports;
        if (victim > 0) ports = tcp_ports_of(victim);
        cut["rank1_ports"] = ports;
        std::string cmd = "true";
        for (int p : ports)
          cmd += " && iptables -I INPUT -p tcp --sport " + std::to_string(p) + " -j DROP" +
                 " && iptables -I INPUT -p tcp --dport " + std::to_string(p) + " -j DROP";
        const auto r = sh(cmd);
        cut["iptables_rc"] = r.rc;
        cut["iptables_out"] = r.out;
        cut["step5_done"] = true;
        cut["ranks_exited_before_cut"] = ranks_done.load();
        res["cut"] = cut;
      });
    }
    auto rs = gstest::run_ranks(worker, so);
    ranks_done = true;
    if (cutter.joinable()) cutter.join();
    for (const auto& r : rs)
      res["ranks"].push_back(json{{"rank", r.rank},
                                  {"exit_code", r.exit_code},
                                  {"signal", r.signal},
                                  {"timed_out", r.timed_out},
                                  {"seconds", r.seconds},
                                  {"output", r.output}});
    res["iptables"] = sh("iptables -L INPUT -v -n -x").out;
    res["tc"] = sh("tc -s qdisc show dev lo").out;
  } catch (const std::exception& e) {
    res["driver_error"] = e.what();
  }
  std::ofstream(result_path) << res.dump(2) << "\n";
  return res.contains("driver_error") ? 3 : 0;
}

// ---------------------------------------------------------------------------
// The test side.

const std::vector<std::string> kUnshare{"/usr/bin/unshare", "--user", "--map-root-user", "--net", "--pid",
                                        "--fork", "--kill-child", "--mount-proc"};

// A prepared data directory and a small job spec in a temp dir.
struct Job {
  gstest::TempDir dir;
  std::string spec;
  explicit Job(int steps) {
    auto r = gstest::run_process({kWorker, "prepare", "--input", kText, "--out", dir.file("data")}, {}, 60s);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    spec = dir.file("job.yaml");
    std::ofstream(spec) << "model: {layers: 2, heads: 2, embd: 64, context: 32}\n"
                        << "data: {train: " << dir.file("data/train.bin") << ", val: " << dir.file("data/val.bin")
                        << "}\n"
                        << "schedule: {steps: " << steps << ", batch_size: 8, eval_interval: 1000, eval_batches: 2}\n"
                        << "optimizer: {lr: 0.003, warmup_steps: 5}\n"
                        << "sharding: {strategy: FULL_SHARD}\n"
                        << "log: {every: 1, format: json}\n";
  }
};

// Runs the worker's ranks in a fresh namespace degraded as `mode` says.
json run_in_namespace(const Job& job, const std::string& mode, std::vector<std::string> flags) {
  const std::string result = job.dir.file("result-" + mode + ".json"), ckpt = job.dir.file("ckpt-" + mode);
  std::vector<std::string> argv = kUnshare;
  for (const auto& a : {gstest::self_exe(), std::string("--netns-driver"), mode, result, ckpt, std::string("--"),
                        kWorker, std::string("--config"), job.spec})
    argv.push_back(a);
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto r = gstest::run_process(argv, {}, 360s);
  EXPECT_FALSE(r.timed_out) << "the namespace driver hung: " << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (!fs::exists(result)) {
    ADD_FAILURE() << "no result from the namespace driver: " << r.output;
    return json::object();
  }
  std::ifstream in(result);
  auto j = json::parse(in);
  EXPECT_FALSE(j.contains("driver_error")) << j.dump(2);
  EXPECT_EQ(j["pid_in_namespace"], 1) << "the driver is PID 1 of its own PID namespace";
  return j;
}

std::vector<double> losses(const json& res) {
  std::vector<double> out;
  if (!res.contains("ranks") || res["ranks"].empty()) return out;
  std::istringstream in(res["ranks"][0]["output"].get<std::string>());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) out.push_back(j["loss"].get<double>());
  }
  return out;
}

// Packets the fault rules dropped (first column of `iptables -L -v -x` for
// DROP rules).
long long dropped_by_iptables(const std::string& listing) {
  long long n = 0;
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    long long pkts = 0, bytes = 0;
    std::string target;
    if (f >> pkts >> bytes >> target && target == "DROP") n += pkts;
  }
  return n;
}

bool namespaces_available() {
  std::vector<std::string> argv = kUnshare;
  for (const char* a : {"/bin/sh", "-c", "PATH=/usr/sbin:/sbin:$PATH; ip link set lo up && iptables -L -n >/dev/null"})
    argv.push_back(a);
  return gstest::run_process(argv, {}, 60s).exit_code == 0;
}

class LinkFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!namespaces_available())
      GTEST_SKIP() << "unshare --user --net --pid (with ip and iptables inside) is not available here";
  }
};

TEST_F(LinkFaults, TwoRankFullShardOverASlowLossyLinkTrainsTheSameLossesAsOverACleanOne) {
  constexpr int kSteps = 12;
  Job job(kSteps);
  const std::vector<std::string> flags{"--checkpoint.dir", ""};
  const json clean = run_in_namespace(job, "clean", flags);
  const json bad = run_in_namespace(job, "bad", flags);
  ASSERT_TRUE(bad.contains("link")) << bad.dump(2);
  std::cout << "[ link ] " << bad["link_text"].get<std::string>() << std::endl;
  RecordProperty("link", bad["link_text"].get<std::string>());
  for (const json* r : {&clean, &bad}) {
    ASSERT_EQ((*r)["ranks"].size(), 2u) << r->dump(2);
    for (const auto& rank : (*r)["ranks"]) {
      EXPECT_EQ(rank["exit_code"], 0) << (*r)["mode"] << " rank " << rank["rank"] << ":\n"
                                      << rank["output"].get<std::string>();
      EXPECT_FALSE(rank["timed_out"].get<bool>());
    }
  }
  // The bad link really lost packets (and the clean one had no rules).
  if (bad["link"] == "netem") {
    std::cout << "[ tc   ] " << bad["tc"].get<std::string>() << std::endl;
    EXPECT_NE(bad["tc"].get<std::string>().find("netem"), std::string::npos) << bad["tc"];
  } else {
    const long long dropped = dropped_by_iptables(bad["iptables"].get<std::string>());
    std::cout << "[ link ] packets dropped by the 2 % rule: " << dropped << "\n"
              << bad["iptables"].get<std::string>() << bad["tc"].get<std::string>() << std::endl;
    EXPECT_GT(dropped, 0) << bad["iptables"];
    EXPECT_NE(bad["tc"].get<std::string>().find("tbf"), std::string::npos) << bad["tc"];
  }
  EXPECT_EQ(dropped_by_iptables(clean["iptables"].get<std::string>()), 0) << clean["iptables"];
  const auto a = losses(clean), b = losses(bad);
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps)) << clean["ranks"][0]["output"].get<std::string>();
  ASSERT_EQ(b.size(), static_cast<size_t>(kSteps)) << bad["ranks"][0]["output"].get<std::string>();
  for (int i = 0; i < kSteps; ++i) EXPECT_EQ(b[i], a[i]) << "step " << i + 1 << " (exact equality)";
  EXPECT_LT(a.back(), a.front()) << "and it learns";
}

TEST_F(LinkFaults, FullLossToOneRankMidRunFailsEveryRankWithinItsDeadlineNamingThePeer) {
  Job job(100000);  // far more steps than can run before the cut
  const json res = run_in_namespace(
      job, "cut",
      {"--checkpoint.dir", job.dir.file("ckpt-cut"), "--checkpoint.interval", "5", "--checkpoint.async", "false",
       "--sharding.timeout_s", std::to_string(kCutTimeoutS)});
  ASSERT_TRUE(res.contains("cut")) << "the step-5 checkpoint never completed:\n" << res.dump(2);
  const json& cut = res["cut"];
  std::cout << "[ cut  ] " << cut.dump() << std::endl;
  ASSERT_EQ(cut["iptables_rc"], 0) << cut.dump(2);
  ASSERT_EQ(cut["ranks_running"], 2) << "both ranks were running at the cut: " << res.dump(2);
  ASSERT_GT(cut["rank1_ports"].size(), 0u) << cut.dump(2);
  ASSERT_EQ(res["ranks"].size(), 2u) << res.dump(2);
  for (const auto& rank : res["ranks"]) {
    const int r = rank["rank"].get<int>(), peer = 1 - r;
    const std::string out = rank["output"].get<std::string>();
    // The hang detector (240 s) did not have to kill it: the deadline ended it.
    EXPECT_FALSE(rank["timed_out"].get<bool>()) << "rank " << r << " hung:\n" << out;
    EXPECT_NE(rank["exit_code"], 0) << "rank " << r << ":\n" << out;
    EXPECT_EQ(rank["signal"], 0) << "rank " << r << " died of a signal instead of failing:\n" << out;
    // Its error names the peer it was waiting for, and the deadline.
    const std::regex names_peer("greenshard-worker: error: .*(receive from|send to|connection to) global rank " +
                                std::to_string(peer) + "\\b");
    EXPECT_TRUE(std::regex_search(out, names_peer)) << "rank " << r << " must name global rank " << peer << ":\n"
                                                    << out;
    const std::regex deadline("greenshard-worker: error: .*(timed out after " + std::to_string(kCutTimeoutS * 1000) +
                              " ms|connection to global rank " + std::to_string(peer) + ")");
    EXPECT_TRUE(std::regex_search(out, deadline)) << "rank " << r << ":\n" << out;
    std::cout << "[ rank " << r << " ] exit " << rank["exit_code"] << " after " << rank["seconds"] << " s: "
              << out.substr(out.find("greenshard-worker: error:") == std::string::npos
                                ? 0
                                : out.find("greenshard-worker: error:"))
              << std::endl;
  }
  EXPECT_GT(dropped_by_iptables(res["iptables"].get<std::string>()), 0) << res["iptables"];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 5 && std::string(argv[1]) == "--netns-driver") return netns_driver(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
