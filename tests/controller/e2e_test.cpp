// End to end with the REAL greenshard-worker (docs/worker-controller.md):
// a 2-rank job through greenshard-controller's local executor runs to
// SUCCEEDED with emissions reported; a SIGKILLed rank makes the gang
// RECOVERING, it resumes from its newest checkpoint and succeeds; a cancel
// leaves no worker process behind; an elastic, migratable job shrinks,
// moves and grows across the windows the real planner gives it (below).
#include <gtest/gtest.h>

#include <carbon/time_ms.h>
#include <httplib.h>
#include <signal.h>

#include <dirent.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/spawn.h"
#include "fixture.h"
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

// ---------------------------------------------------------------------------
// An elastic, migratable job through the real carbon planner and the real
// worker: two local regions with scripted hourly intensity, the controller
// in process on a ManualClock (carbon windows are hours: the test moves the
// clock to each window boundary once the gang has trained some steps), the
// local executor running greenshard-worker on Gloo over loopback.
//
// The script (UTC hours; the clock starts at 00:00):
//   A: 50 g/kWh in hours 0-1, 160 in hours 2-3, 600 after
//   B: 600, but 60 in hours 4-5
// The job: 2 nodes nominal (elastic 1..2), migratable, a concave declared
// curve (1 node: 750 tokens/s, 2 nodes: 1000), 5 h of work at 2 nodes, 4 h
// of slack. The cheapest plan (CarbonScaler's marginal rule over 2 h blocks,
// docs/elastic.md) is
//   [00:00, 02:00) A on 2 nodes   (clean: both increments pay)
//   [02:00, 04:00) A on 1 node    (160 g/kWh: only the efficient first node)
//   [04:00, ~05:30) B on 2 nodes  (B's clean hours: a move and a resize)
// i.e. 2 ranks -> 1 rank -> moves region -> 2 ranks.
namespace {

struct LogSegment {
  int world = 0;
  std::vector<std::pair<int64_t, double>> steps;  // (step, loss)
};

// Rank 0's log, one segment per launch (the local executor's banner).
std::vector<LogSegment> segments_of(const std::string& log) {
  std::vector<LogSegment> out;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    auto b = line.find("=== greenshard: attempt ");
    if (b != std::string::npos) {
      LogSegment s;
      auto slash = line.find('/', b);
      if (slash != std::string::npos) s.world = std::atoi(line.c_str() + slash + 1);
      out.push_back(s);
      continue;
    }
    if (line.empty() || line[0] != '{' || out.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step") || !j["step"].is_number_integer() || !j.contains("loss") ||
        !j["loss"].is_number())
      continue;
    out.back().steps.push_back({j["step"].get<int64_t>(), j["loss"].get<double>()});
  }
  return out;
}

std::string hourly(std::map<int, double> v, double rest) {
  std::string s = "[";
  for (int h = 0; h < 24; ++h) s += (h ? ", " : "") + std::to_string(v.count(h) ? v[h] : rest);
  return s + "]";
}

// A small text corpus tokenized by the real worker into data/tok/{train,val}.bin.
void prepare_corpus(gstest::TempDir& data) {
  {
    std::ofstream text(data.file("corpus.txt"));
    for (int i = 0; i < 400; ++i)
      text << "the quick brown fox " << i << " jumps over the lazy dog while green shards train quietly.\n";
  }
  auto prep = gstest::run_process({WORKER_BIN, "prepare", "--input", data.file("corpus.txt"), "--out", data.file("tok")},
                                  {}, std::chrono::seconds(120));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
}

}  // namespace

TEST(E2EElastic, AJobShrinksMovesAndGrowsAcrossItsWindowsWithoutLosingAStep) {
  gstest::TempDir data;
  ASSERT_NO_FATAL_FAILURE(prepare_corpus(data));
  ctltest::Options o;
  o.worker_script = std::string("#!/bin/sh\nexec '") + WORKER_BIN + "' \"$@\"\n";
  o.regions_yaml = "regions:\n  - {name: A, nodes: 2, hourly: " + hourly({{0, 50}, {1, 50}, {2, 160}, {3, 160}}, 600) +
                   "}\n  - {name: B, nodes: 2, hourly: " + hourly({{4, 60}, {5, 60}}, 600) + "}\n";
  o.grace_ms = 60000;
  ctltest::Controller c(o);  // the clock stands at 2025-12-02T00:00:00Z
  constexpr int kSteps = 2000;  // the last window runs most of them: the test reacts long before
  json spec = {
      {"name", "e2e-elastic"},
      {"worker",
       {{"model", {{"layers", 2}, {"heads", 2}, {"embd", 32}, {"context", 32}, {"vocab", 256}}},
        {"data", {{"train", data.file("tok/train.bin")}, {"val", data.file("tok/val.bin")}}},
        {"schedule", {{"steps", kSteps}, {"batch_size", 4}, {"eval_interval", 0}}},
        {"checkpoint", {{"interval", 10}, {"keep_last", 2}}},
        {"log", {{"format", "json"}, {"every", 1}}},
        {"status", {{"interval_s", 0.2}}}}},
      {"regions", {"A", "B"}},
      {"home_region", "A"},
      {"nodes", 2},
      {"procs_per_node", 1},
      {"max_restarts", 0},
      {"elastic", {{"min_nodes", 1}, {"max_nodes", 2}}},
      {"migratable", true},
      {"scaling", {{{"nodes", 1}, {"tokens_per_second", 750}}, {{"nodes", 2}, {"tokens_per_second", 1000}}}},
      {"estimate", {{"duration_s", 5 * 3600}, {"checkpoint_gb", 0.001}}},
      {"max_delay_s", 4 * 3600}};
  auto cli = c.client(ctltest::kUserA);
  auto r = cli.Post("/v1/jobs", spec.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
  const std::string id = json::parse(r->body).at("id");
  c.sched->cycle();  // at 00:00 exactly: placed, and the first window opens

  // The plan is the real planner's.
  const controller::Job placed = *c.registry->get(id);
  ASSERT_TRUE(placed.placement) << placed.conditions().back().message;
  const auto& pl = *placed.placement;
  std::string plan_text = pl.explanation;
  for (size_t i = 0; i < pl.windows.size(); ++i) {
    auto at = controller::window_place(placed, i);
    plan_text += "\n  " + controller::format_rfc3339(pl.windows[i].first) + " .. " +
                 controller::format_rfc3339(pl.windows[i].second) + " " + at.region + " x" + std::to_string(at.nodes);
  }
  const int64_t h = carbon::kHourMs, t0 = c.clock.now_ms();
  std::printf("the planner's plan: %s\n", plan_text.c_str());
  ASSERT_EQ(pl.windows.size(), 3u) << plan_text;
  EXPECT_EQ(controller::window_place(placed, 0), (controller::WindowPlace{"A", 2})) << plan_text;
  EXPECT_EQ(controller::window_place(placed, 1), (controller::WindowPlace{"A", 1})) << plan_text;
  EXPECT_EQ(controller::window_place(placed, 2), (controller::WindowPlace{"B", 2})) << plan_text;
  EXPECT_EQ(pl.windows[0].first, t0) << plan_text;
  EXPECT_EQ(pl.windows[1].first, t0 + 2 * h) << plan_text;
  EXPECT_EQ(pl.windows[2].first, t0 + 4 * h) << plan_text;
  ASSERT_EQ(pl.changes.size(), 2u) << plan_text;

  // Through the windows: once the gang has trained 30 steps in its window,
  // the clock moves to the next window's start; the scheduler checkpoints
  // and stops the gang, and starts the next one with its width and region.
  auto job = [&] { return *c.registry->get(id); };
  int64_t window_from = 0;
  for (size_t k = 0; k + 1 < pl.windows.size(); ++k) {
    ASSERT_TRUE(c.cycle_until(
        [&] {
          const auto j = job();
          return controller::is_terminal(j.state()) ||
                 (j.state() == controller::JobState::kRunning && j.gang.window == int(k) &&
                  j.progress.reported && j.progress.state == greenshard::RunPhase::kRunning && j.progress.step >= window_from + 30);
        },
        30000))
        << "window " << k << ": " << job().to_document().dump(1);
    ASSERT_EQ(job().state(), controller::JobState::kRunning) << "finished too early: " << job().to_document().dump(1);
    c.clock.set_ms(pl.windows[k + 1].first);
    ASSERT_TRUE(c.cycle_until(
        [&] {
          const auto j = job();
          return controller::is_terminal(j.state()) ||
                 (j.state() == controller::JobState::kRunning && j.gang.window == int(k) + 1);
        },
        30000))
        << "window " << k + 1 << ": " << job().to_document().dump(1);
    ASSERT_EQ(job().state(), controller::JobState::kRunning) << job().to_document().dump(1);
    window_from = job().progress.step;
  }
  ASSERT_TRUE(c.cycle_until([&] { return controller::is_terminal(job().state()); }, 60000));
  const controller::Job done = job();
  std::string rank0;
  {
    std::ifstream in(c.dir.file("jobs/" + id + "/logs/rank-0.log"));
    rank0.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(done.state(), controller::JobState::kSucceeded) << done.to_document().dump(1) << rank0;
  EXPECT_EQ(done.recovery_count, 0);
  EXPECT_EQ(done.progress.step, kSteps);

  // The history: a resize, then a move (with a resize) -- each a condition.
  std::vector<std::string> launches;
  for (const auto& cond : done.conditions())
    if (cond.state == controller::JobState::kStarting) launches.push_back(cond.reason);
  EXPECT_EQ(launches, (std::vector<std::string>{"WindowOpened", "Resized", "Migrated"}));
  const std::string m = c.metrics.render();
  EXPECT_NE(m.find("greenshard_job_resizes_total{direction=\"shrink\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("greenshard_job_resizes_total{direction=\"grow\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("greenshard_job_migrations_total{from=\"A\",to=\"B\"} 1"), std::string::npos) << m;

  // Three launches of 2, 1, 2 ranks; every step once, in order; each launch
  // resumed at the step after the last one before it (its SIGTERM
  // checkpoint); the loss carries on instead of starting over.
  const auto segs = segments_of(rank0);
  ASSERT_EQ(segs.size(), 3u) << rank0;
  EXPECT_EQ(segs[0].world, 2);
  EXPECT_EQ(segs[1].world, 1);
  EXPECT_EQ(segs[2].world, 2);
  for (const auto& s : segs) ASSERT_FALSE(s.steps.empty()) << rank0;
  const double initial = segs[0].steps.front().second;
  EXPECT_EQ(segs[0].steps.front().first, 1);
  for (size_t k = 0; k < segs.size(); ++k) {
    for (size_t i = 1; i < segs[k].steps.size(); ++i)
      EXPECT_EQ(segs[k].steps[i].first, segs[k].steps[i - 1].first + 1) << "launch " << k;
    if (k == 0) continue;
    const auto [last_step, last_loss] = segs[k - 1].steps.back();
    const auto [first_step, first_loss] = segs[k].steps.front();
    EXPECT_EQ(first_step, last_step + 1) << "launch " << k << " resumed elsewhere than its last checkpoint";
    EXPECT_LT(last_loss, initial - 0.5) << "launch " << k - 1 << " learned too little to tell";
    EXPECT_LT(std::abs(first_loss - last_loss), 0.5 * (initial - last_loss))
        << "launch " << k << ": loss " << first_loss << " after " << last_loss << " (initial " << initial << ")";
  }
  EXPECT_EQ(segs.back().steps.back().first, kSteps);
  std::ifstream sum(c.dir.file("jobs/" + id + "/summary.json"));
  json s = json::parse(sum, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s.value("resumed_from_step", int64_t{-1}), segs[1].steps.back().first) << s.dump();
  EXPECT_EQ(s.value("world_size", 0), 2);
  EXPECT_EQ(s.value("region", ""), "B");
  EXPECT_TRUE(worker_pids(id).empty());
}

// Preemption with the real worker: a low-priority interruptible job holds
// the only node; a higher-priority job arrives, the scheduler tells the low
// one to checkpoint and stop (SIGTERM), runs the high one, and places the
// low one again. It resumes from the checkpoint it wrote on SIGTERM: its
// second launch starts at the step after its last one, and no step is lost
// or run twice.
TEST(E2EPreemption, APreemptedJobResumesFromItsCheckpointWithoutLosingAStep) {
  gstest::TempDir data;
  ASSERT_NO_FATAL_FAILURE(prepare_corpus(data));
  ctltest::Options o;
  o.worker_script = std::string("#!/bin/sh\nexec '") + WORKER_BIN + "' \"$@\"\n";
  o.regions_yaml = "regions:\n  - {name: DE, nodes: 1, intensity: 300}\n";
  o.grace_ms = 60000;
  ctltest::Controller c(o);
  constexpr int kLowSteps = 1500;  // the test preempts it long before it ends
  auto spec = [&](const std::string& name, int steps, int priority, bool interruptible) {
    return json{{"name", name},
                {"worker",
                 {{"model", {{"layers", 2}, {"heads", 2}, {"embd", 32}, {"context", 32}, {"vocab", 256}}},
                  {"data", {{"train", data.file("tok/train.bin")}, {"val", data.file("tok/val.bin")}}},
                  {"schedule", {{"steps", steps}, {"batch_size", 4}, {"eval_interval", 0}}},
                  {"checkpoint", {{"interval", 25}, {"keep_last", 2}}},
                  {"log", {{"format", "json"}, {"every", 1}}},
                  {"status", {{"interval_s", 0.2}}}}},
                {"regions", {"DE"}},
                {"nodes", 1},
                {"procs_per_node", 1},
                {"max_restarts", 0},
                {"priority", priority},
                {"interruptible", interruptible}};
  };
  auto post = [&](const char* token, const json& s) {
    auto r = c.client(token).Post("/v1/jobs", s.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    return r && r->status == 201 ? json::parse(r->body).at("id").get<std::string>() : std::string();
  };
  const std::string low = post(ctltest::kUserA, spec("low", kLowSteps, 0, true));
  ASSERT_FALSE(low.empty());
  auto job = [&](const std::string& id) { return *c.registry->get(id); };
  ASSERT_TRUE(c.cycle_until(
      [&] {
        const auto j = job(low);
        return controller::is_terminal(j.state()) ||
               (j.state() == controller::JobState::kRunning && j.progress.reported && j.progress.state == greenshard::RunPhase::kRunning && j.progress.step >= 40);
      },
      30000))
      << job(low).to_document().dump(1);
  ASSERT_EQ(job(low).state(), controller::JobState::kRunning) << "finished too early";

  const std::string high = post(ctltest::kUserB, spec("high", 30, 5, false));
  ASSERT_FALSE(high.empty());
  ASSERT_TRUE(c.cycle_until([&] { return controller::is_terminal(job(high).state()); }, 30000))
      << job(high).to_document().dump(1) << job(low).to_document().dump(1);
  EXPECT_EQ(job(high).state(), controller::JobState::kSucceeded) << job(high).to_document().dump(1);
  ASSERT_TRUE(c.cycle_until([&] { return controller::is_terminal(job(low).state()); }, 60000))
      << job(low).to_document().dump(1);
  const controller::Job done = job(low);
  std::string rank0;
  {
    std::ifstream in(c.dir.file("jobs/" + low + "/logs/rank-0.log"));
    rank0.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(done.state(), controller::JobState::kSucceeded) << done.to_document().dump(1) << rank0;
  EXPECT_EQ(done.recovery_count, 0) << "a preemption is no failure";

  // The history: preempted for `high`, back in line, placed and started again.
  std::vector<std::string> reasons;
  for (const auto& cond : done.conditions()) reasons.push_back(cond.reason);
  auto pre = std::find(reasons.begin(), reasons.end(), "Preempted");
  ASSERT_NE(pre, reasons.end()) << done.to_document().dump(1);
  for (const auto& cond : done.conditions())
    if (cond.reason == "Preempted") {
      EXPECT_EQ(cond.state, controller::JobState::kPending);
      EXPECT_NE(cond.message.find("preempted by " + high + " (priority 5)"), std::string::npos) << cond.message;
    }
  // The high job started while the low one was down: it started after the
  // preemption and ended before the low one started again.
  int64_t preempted_ms = 0, restarted_ms = 0;
  for (const auto& cond : done.conditions()) {
    if (cond.reason == "Preempted") preempted_ms = cond.time_ms;
    if (preempted_ms && !restarted_ms && cond.state == controller::JobState::kStarting) restarted_ms = cond.time_ms;
  }
  int64_t high_started_ms = 0;
  const controller::Job high_done = job(high);  // a named copy: a temporary's conditions() would dangle in the loop
  for (const auto& cond : high_done.conditions())
    if (cond.state == controller::JobState::kStarting) high_started_ms = cond.time_ms;
  EXPECT_GE(high_started_ms, preempted_ms);
  EXPECT_GE(restarted_ms, high_started_ms);

  // Two launches; every step once, in order; the second resumed at the step
  // after the last of the first (its SIGTERM checkpoint), and the loss
  // carries on.
  const auto segs = segments_of(rank0);
  ASSERT_EQ(segs.size(), 2u) << rank0;
  for (const auto& s : segs) ASSERT_FALSE(s.steps.empty()) << rank0;
  EXPECT_EQ(segs[0].steps.front().first, 1);
  for (const auto& s : segs)
    for (size_t i = 1; i < s.steps.size(); ++i) EXPECT_EQ(s.steps[i].first, s.steps[i - 1].first + 1);
  const auto [last_step, last_loss] = segs[0].steps.back();
  const auto [first_step, first_loss] = segs[1].steps.front();
  EXPECT_EQ(first_step, last_step + 1) << "resumed elsewhere than its preemption checkpoint";
  const double initial = segs[0].steps.front().second;
  EXPECT_LT(std::abs(first_loss - last_loss), 0.5 * std::abs(initial - last_loss) + 0.5)
      << "loss " << first_loss << " after " << last_loss << " (initial " << initial << ")";
  EXPECT_EQ(segs[1].steps.back().first, kLowSteps);
  std::ifstream sum(c.dir.file("jobs/" + low + "/summary.json"));
  json s = json::parse(sum, nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s.value("resumed_from_step", int64_t{-1}), last_step) << s.dump();
  EXPECT_TRUE(worker_pids(low).empty());
  EXPECT_TRUE(worker_pids(high).empty());
  const std::string m = c.metrics.render();
  EXPECT_NE(m.find("greenshard_preemptions_total{region=\"DE\",tenant=\"team-a\"} 1"), std::string::npos) << m;
}
