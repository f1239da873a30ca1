// End to end with the REAL greenshard-worker (docs/worker-controller.md):
// a 2-rank job through greenshard-controller's local executor runs to
// SUCCEEDED with emissions reported; a SIGKILLed rank makes the gang
// RECOVERING, it resumes from its newest checkpoint and succeeds; a cancel
// leaves no worker process behind.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <dirent.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/spawn.h"
#include "process.h"

using json = nlohmann::json;
using namespace ctltest;

namespace {

const char* kUser = "user-token-team-a-0001";

// pids of worker processes of `job_id` (and of rank `rank` when >= 0), by
// their environment.
std::vector<pid_t> worker_pids(const std::string& job_id, int rank = -1) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    if (stat.find(") Z") != std::string::npos) continue;  // a zombie is not running
    std::set<std::string> vars;
    for (size_t a = 0, b; a < env.size(); a = b + 1) {
      b = env.find('\0', a);
      if (b == std::string::npos) b = env.size();
      vars.insert(env.substr(a, b - a));
    }
    if (!vars.count("GREENSHARD_JOB_ID=" + job_id)) continue;
    if (rank >= 0 && !vars.count("RANK=" + std::to_string(rank))) continue;
    out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

class E2E : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir.file("tokens")) << kUser << ",team-a,user\n";
    std::ofstream(dir.file("regions.yaml")) << "regions:\n  - {name: local, nodes: 1, intensity: 250, pue: 1.1}\n";
    // Some text to tokenize.
    std::ofstream text(dir.file("corpus.txt"));
    for (int i = 0; i < 400; ++i)
      text << "the quick brown fox " << i << " jumps over the lazy dog while green shards train quietly.\n";
    text.close();
    auto prep = gstest::run_process({WORKER_BIN, "prepare", "--input", dir.file("corpus.txt"), "--out", dir.file("tok")},
                                    {}, std::chrono::seconds(120));
    ASSERT_EQ(prep.exit_code, 0) << prep.output;
    ctl = std::make_unique<ControllerProcess>(
        CONTROLLER_BIN,
        std::vector<std::string>{"--port", "0", "--data-dir", dir.file("data"), "--tokens", dir.file("tokens"),
                                 "--regions", dir.file("regions.yaml"), "--worker", WORKER_BIN, "--cycle-ms", "100",
                                 "--backoff-ms", "200", "--stop-grace-ms", "20000"},
        dir.file("controller.log"), dir.file("port"));
    port = ctl->port();
  }

  json worker_spec(int steps) {
    return {{"model", {{"layers", 2}, {"heads", 2}, {"embd", 32}, {"context", 32}, {"vocab", 256}}},
            {"data", {{"train", dir.file("tok/train.bin")}, {"val", dir.file("tok/val.bin")}}},
            {"schedule", {{"steps", steps}, {"batch_size", 4}, {"eval_interval", 10}, {"eval_batches", 1}}},
            {"checkpoint", {{"interval", 5}, {"keep_last", 2}}}};
  }

  std::string submit(int steps) {
    json s = {{"name", "e2e"}, {"worker", worker_spec(steps)}, {"regions", {"local"}}, {"procs_per_node", 2},
              {"max_restarts", 2}};
    auto r = client().Post("/v1/jobs", s.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    return r ? json::parse(r->body).value("id", "") : "";
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", port);
    c.set_bearer_token_auth(kUser);
    c.set_read_timeout(std::chrono::seconds(30));
    return c;
  }

  json get(const std::string& id) {
    auto r = client().Get("/v1/jobs/" + id);
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  }

  // Polls (100 ms apart, at most `polls` times) until pred(job).
  template <class P>
  json wait_for(const std::string& id, P pred, int polls = 3000) {
    json j;
    for (int i = 0; i < polls; ++i) {
      j = get(id);
      if (pred(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "gave up waiting; last: " << j.dump(1) << "\n" << ctl->log() << logs(id);
    return j;
  }

  std::string logs(const std::string& id) {
    std::string out;
    for (int r = 0; r < 2; ++r) {
      auto x = client().Get("/v1/jobs/" + id + "/logs?rank=" + std::to_string(r));
      if (x) out += "--- rank " + std::to_string(r) + "\n" + x->body;
    }
    return out;
  }

  gstest::TempDir dir;
  std::unique_ptr<ControllerProcess> ctl;
  int port = 0;
};

bool state_is(const json& j, const char* s) { return j.value("state", "") == s; }
bool ended(const json& j) {
  std::string s = j.value("state", "");
  return s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED";
}

}  // namespace

TEST_F(E2E, ATwoRankJobRunsToSuccessWithEmissionsReported) {
  const std::string id = submit(20);
  json j = wait_for(id, ended);
  ASSERT_EQ(j["state"], "SUCCEEDED") << j.dump(1) << logs(id);
  EXPECT_GT(j["energy"]["joules"].get<double>(), 0) << j.dump(1);
  EXPECT_GT(j["energy"]["operational_grams"].get<double>(), 0) << j.dump(1);
  EXPECT_EQ(j["recovery_count"], 0);
  EXPECT_TRUE(worker_pids(id).empty());
}

TEST_F(E2E, AKilledRankRecoversFromCheckpointAndSucceeds) {
  const std::string id = submit(400);
  const std::string ckpt = dir.file("data/jobs/" + id + "/ckpt");
  // Wait until a checkpoint is complete (a DONE marker somewhere under ckpt/).
  bool have_ckpt = false;
  for (int i = 0; i < 3000 && !have_ckpt; ++i) {
    auto r = gstest::run_process({"/bin/sh", "-c", "find '" + ckpt + "' -name DONE | grep -q ."}, {},
                                 std::chrono::seconds(10));
    have_ckpt = r.exit_code == 0;
    if (!have_ckpt) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(have_ckpt) << logs(id);
  auto pids = worker_pids(id, 1);
  ASSERT_EQ(pids.size(), 1u) << logs(id);
  ::kill(pids[0], SIGKILL);
  json rec = wait_for(id, [](const json& j) { return j.value("recovery_count", 0) >= 1 || ended(j); });
  EXPECT_EQ(rec["recovery_count"], 1) << rec.dump(1);
  bool saw_recovering = false;
  json j = wait_for(id, ended);
  for (auto& c : j["conditions"]) saw_recovering = saw_recovering || c["state"] == "RECOVERING";
  EXPECT_TRUE(saw_recovering) << j.dump(1);
  ASSERT_EQ(j["state"], "SUCCEEDED") << j.dump(1) << logs(id);
  std::ifstream sum(dir.file("data/jobs/" + id + "/summary.json"));
  json s = json::parse(sum, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_GT(s.value("resumed_from_step", 0), 0) << s.dump();
}

TEST_F(E2E, CancelLeavesNoWorkerProcess) {
  const std::string id = submit(100000);
  wait_for(id, [](const json& j) { return state_is(j, "RUNNING") || ended(j); });
  // Let the ranks get going.
  for (int i = 0; i < 300 && worker_pids(id).size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(worker_pids(id).size(), 2u);
  auto r = client().Post("/v1/jobs/" + id + "/cancel", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(get(id)["state"], "CANCELLED");
  bool gone = false;
  for (int i = 0; i < 600 && !gone; ++i) {
    gone = worker_pids(id).empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << logs(id);
}
