// greenshard-controller and the greenshard CLI as real processes: the CLI's
// commands and exit codes, durability under SIGKILL, and a restart that
// resumes a running gang.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "common/spawn.h"
#include "process.h"

using json = nlohmann::json;
using namespace ctltest;

namespace {

const char* kUser = "user-token-team-a-0001";
const char* kOther = "user-token-team-b-0001";

// A worker stand-in following docs/worker-controller.md (exit codes, summary,
// status push with the per-job token, checkpoint-and-exit on SIGTERM). Its
// behaviour is the spec's data.train: the controller checks `worker` with the
// real worker's schema at submit.
const char* kWorker = R"SH(#!/bin/sh
B=$(sed -n 's/.*"train": *"\([a-z0-9-]*\)".*/\1/p' "$2")
summary() { [ "$RANK" = 0 ] && printf '{"state":"%s","steps":4,"tokens":512,"energy_joules":7200,"operational_grams":0.8,"embodied_grams":0.2}\n' "$1" > "$GREENSHARD_SUMMARY_PATH"; }
echo "rank $RANK starting $B"
case "$B" in
  succeed)
    if [ "$RANK" = 0 ]; then
      curl -s -o /dev/null -X POST -H "Authorization: Bearer $GREENSHARD_STATUS_TOKEN" \
        -H 'Content-Type: application/json' \
        -d '{"state":"running","step":2,"total_steps":4,"loss":3.1,"tokens_per_s":50}' "$GREENSHARD_STATUS_URL"
    fi
    summary succeeded; exit 0 ;;
  fail) exit 1 ;;
  run) trap 'summary preempted; exit 0' TERM; echo "trap set"
       while [ ! -e "$GREENSHARD_CHECKPOINT_DIR/../release" ]; do sleep 0.05; done
       summary succeeded; exit 0 ;;
esac
exit 2
)SH";

struct Env {
  gstest::TempDir dir;
  std::string data, tokens, regions, worker;
  Env() {
    data = dir.file("data");
    tokens = dir.file("tokens");
    regions = dir.file("regions.yaml");
    worker = dir.file("worker.sh");
    std::ofstream(tokens) << kUser << ",team-a,user\n" << kOther << ",team-b,user\n";
    std::ofstream(regions) << "regions:\n  - {name: DE, nodes: 2, intensity: 300}\n  - {name: FR, nodes: 2, intensity: 60}\n";
    std::ofstream(worker) << kWorker;
    ::chmod(worker.c_str(), 0755);
  }
  std::unique_ptr<ControllerProcess> start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--port", "0", "--data-dir", data, "--tokens", tokens, "--regions", regions,
                                     "--worker", worker, "--cycle-ms", "50", "--backoff-ms", "50",
                                     "--stop-grace-ms", "3000"};
    for (auto& e : extra) args.push_back(e);
    return std::make_unique<ControllerProcess>(CONTROLLER_BIN, args, dir.file("controller.log"), dir.file("port"));
  }
};

gstest::RankResult cli(int port, std::vector<std::string> args, const std::string& token = kUser,
                       std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {CLI_BIN};
  if (port > 0) {
    argv.push_back("--server");
    argv.push_back("http://127.0.0.1:" + std::to_string(port));
  }
  if (!token.empty()) {
    argv.push_back("--token");
    argv.push_back(token);
  }
  for (auto& a : args) argv.push_back(a);
  env["HOME"] = "/nonexistent";
  return gstest::run_process(argv, env, std::chrono::seconds(120));
}

std::string spec_yaml(const std::string& behaviour, const std::string& extra = "") {
  return "name: cli-" + behaviour + "\nworker:\n  data: {train: " + behaviour +
         ", val: 'quoted: string'}\nregions: [DE, FR]\nprocs_per_node: 2\nmax_restarts: 0\n" + extra;
}

}  // namespace

TEST(ControllerCli, SubmitWatchGetListLogsRegionsCancel) {
  Env e;
  auto ctl = e.start();
  int port = ctl->port();
  std::ofstream(e.dir.file("ok.yaml")) << spec_yaml("succeed");
  auto sub = cli(port, {"--output", "json", "submit", e.dir.file("ok.yaml")});
  ASSERT_EQ(sub.exit_code, 0) << sub.output;
  json job = json::parse(sub.output);
  const std::string id = job["id"];
  EXPECT_EQ(job["spec"]["worker"]["data"]["val"], "quoted: string");

  auto w = cli(port, {"watch", id, "--interval", "0.1"});
  EXPECT_EQ(w.exit_code, 0) << w.output;
  EXPECT_NE(w.output.find("SUCCEEDED"), std::string::npos) << w.output;

  auto g = cli(port, {"--output", "json", "get", id});
  ASSERT_EQ(g.exit_code, 0) << g.output;
  json gj = json::parse(g.output);
  EXPECT_EQ(gj["state"], "SUCCEEDED");
  EXPECT_EQ(gj["placement"]["region"], "FR");
  EXPECT_DOUBLE_EQ(gj["energy"]["total_grams"].get<double>(), 1.0);

  auto l = cli(port, {"list"});
  EXPECT_EQ(l.exit_code, 0);
  EXPECT_NE(l.output.find(id), std::string::npos) << l.output;
  auto lg = cli(port, {"logs", id, "--rank", "1"});
  EXPECT_EQ(lg.exit_code, 0);
  EXPECT_NE(lg.output.find("rank 1 starting succeed"), std::string::npos) << lg.output;
  auto r = cli(port, {"regions"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("FR"), std::string::npos);

  std::ofstream(e.dir.file("run.yaml")) << spec_yaml("run");
  auto sub2 = cli(port, {"--output", "json", "submit", e.dir.file("run.yaml")});
  ASSERT_EQ(sub2.exit_code, 0) << sub2.output;
  const std::string id2 = json::parse(sub2.output)["id"];
  auto c = cli(port, {"cancel", id2});
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("CANCELLED"), std::string::npos);
  auto w2 = cli(port, {"watch", id2, "--interval", "0.1"});
  EXPECT_EQ(w2.exit_code, 10) << w2.output;
  auto d = cli(port, {"delete", id2});
  EXPECT_EQ(d.exit_code, 0) << d.output;
}

struct ExitCase {
  const char* sentence;
  std::function<gstest::RankResult(Env&, int port)> run;
  int code;
  const char* message;  // substring of the output
};

const ExitCase kExitCases[] = {
    {"no server flag env or config file is a usage error",
     [](Env&, int) { return cli(0, {"list"}); }, 2, "--server: required"},
    {"an unknown flag is a usage error", [](Env&, int p) { return cli(p, {"list", "--colour"}); }, 2, "colour"},
    {"an unreadable spec file is a usage error naming the file",
     [](Env& e, int p) { return cli(p, {"submit", e.dir.file("missing.yaml")}); }, 2, "missing.yaml"},
    {"a server nobody listens on is exit 3",
     [](Env&, int) { return cli(gstest::free_port(), {"list"}); }, 3, "cannot reach"},
    {"an unknown token is exit 4", [](Env&, int p) { return cli(p, {"list"}, "no-such-token-anywhere"); }, 4,
     "unknown token"},
    {"an unknown job is exit 5", [](Env&, int p) { return cli(p, {"get", "jmissing"}); }, 5, "no job"},
    {"another tenant's job is exit 5",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("s.yaml")) << spec_yaml("run");
       auto s = cli(p, {"--output", "json", "submit", e.dir.file("s.yaml")}, kOther);
       return cli(p, {"get", json::parse(s.output)["id"].get<std::string>()});
     },
     5, "no job"},
    {"cancelling a finished job is exit 6",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("s.yaml")) << spec_yaml("fail");
       auto s = cli(p, {"--output", "json", "submit", e.dir.file("s.yaml")});
       std::string id = json::parse(s.output)["id"];
       cli(p, {"watch", id, "--interval", "0.1"});
       return cli(p, {"cancel", id});
     },
     6, "already FAILED"},
    {"an invalid spec is exit 7 naming the field",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("s.yaml")) << spec_yaml("succeed", "nodes: 0\n");
       return cli(p, {"submit", e.dir.file("s.yaml")});
     },
     7, "[field: nodes]"},
    {"an unknown region is exit 7 naming the field",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("s.yaml")) << "name: x\nworker: {data: {train: t.bin}}\nregions: [DE, MARS]\n";
       return cli(p, {"submit", e.dir.file("s.yaml")});
     },
     7, "[field: regions[1]]"},
    {"watching a job that fails is exit 10",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("s.yaml")) << spec_yaml("fail");
       auto s = cli(p, {"--output", "json", "submit", e.dir.file("s.yaml")});
       return cli(p, {"watch", json::parse(s.output)["id"].get<std::string>(), "--interval", "0.1"});
     },
     10, "ended FAILED"},
    {"the server and token may come from a config file",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("cfg.yaml")) << "server: http://127.0.0.1:" << p << "\ntoken: " << kUser << "\n";
       return cli(0, {"--config", e.dir.file("cfg.yaml"), "list"}, "");
     },
     0, "STATE"},
    {"the server and token may come from the environment",
     [](Env&, int p) {
       return cli(0, {"list"}, "",
                  {{"GREENSHARD_SERVER", "http://127.0.0.1:" + std::to_string(p)}, {"GREENSHARD_TOKEN", kUser}});
     },
     0, "STATE"},
    {"an unknown key in the config file is a usage error",
     [](Env& e, int p) {
       std::ofstream(e.dir.file("cfg.yaml")) << "server: http://127.0.0.1:" << p << "\ntokn: x\n";
       return cli(0, {"--config", e.dir.file("cfg.yaml"), "list"}, "");
     },
     2, "unknown key 'tokn'"},
};

class CliExit : public ::testing::TestWithParam<ExitCase> {};
TEST_P(CliExit, Code) {
  Env e;
  auto ctl = e.start();
  int port = ctl->port();
  const auto& c = GetParam();
  auto r = c.run(e, port);
  EXPECT_EQ(r.exit_code, c.code) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
}
INSTANTIATE_TEST_SUITE_P(ControllerCli, CliExit, ::testing::ValuesIn(kExitCases),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(ControllerDurability, EveryAcknowledgedSubmissionSurvivesSigkill) {
  Env e;
  std::map<std::string, json> acked;  // id -> spec sent
  std::mutex mu;
  for (int round = 0; round < 2; ++round) {
    auto ctl = e.start();
    int port = ctl->port();
    std::atomic<bool> stop{false};
    std::atomic<int> count{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t)
      clients.emplace_back([&, t] {
        httplib::Client c("127.0.0.1", port);
        c.set_bearer_token_auth(kUser);
        for (int i = 0; !stop; ++i) {
          json s = {{"name", "d-" + std::to_string(round) + "-" + std::to_string(t) + "-" + std::to_string(i)},
                    {"worker", {{"data", {{"train", "none"}, {"seed", i}}}}},
                    {"regions", {"DE"}},
                    {"priority", i % 7}};
          auto r = c.Post("/v1/jobs", s.dump(), "application/json");
          if (!r) break;  // the controller died mid-request: not acknowledged
          if (r->status == 201) {
            std::lock_guard<std::mutex> l(mu);
            acked[json::parse(r->body)["id"]] = s;
            ++count;
          }
        }
      });
    while (count < 150 + round * 150) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ctl->kill(SIGKILL);  // while the clients are still submitting
    stop = true;
    for (auto& t : clients) t.join();
  }
  auto ctl = e.start();
  int port = ctl->port();
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(kUser);
  ASSERT_GE(acked.size(), 300u);
  for (auto& [id, s] : acked) {
    auto r = c.Get("/v1/jobs/" + id);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << id;
    json j = json::parse(r->body);
    EXPECT_EQ(j["spec"]["name"], s["name"]);
    EXPECT_EQ(j["spec"]["worker"], s["worker"]);
    EXPECT_EQ(j["spec"]["priority"], s["priority"]);
  }
}

TEST(ControllerDurability, ARestartedControllerRestartsARunningGangFromCheckpoint) {
  Env e;
  std::string id;
  json rt;
  {
    auto ctl = e.start();
    int port = ctl->port();
    std::ofstream(e.dir.file("run.yaml")) << spec_yaml("run", "regions: [DE]\n");
    auto s = cli(port, {"--output", "json", "submit", e.dir.file("run.yaml")});
    ASSERT_EQ(s.exit_code, 0) << s.output;
    id = json::parse(s.output)["id"];
    httplib::Client c("127.0.0.1", port);
    c.set_bearer_token_auth(kUser);
    for (int i = 0; i < 3000; ++i) {
      auto r = c.Get("/v1/jobs/" + id + "/logs?rank=1");
      if (r && r->status == 200 && r->body.find("trap set") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ctl->kill_controller_only();  // SIGKILL: the gang gets SIGTERM through PR_SET_PDEATHSIG
  }
  auto ctl = e.start();
  int port = ctl->port();
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(kUser);
  std::string state;
  for (int i = 0; i < 3000 && state != "RUNNING"; ++i) {
    auto r = c.Get("/v1/jobs/" + id);
    json j = json::parse(r->body);
    state = j["state"];
    bool restarted = false;
    for (auto& cond : j["conditions"]) restarted = restarted || cond["reason"] == "ControllerRestarted";
    if (state == "RUNNING" && !restarted) state = "";  // not yet seen the restart
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(state, "RUNNING") << ctl->log();
  std::ofstream(e.data + "/jobs/" + id + "/release") << "go\n";
  auto w = cli(port, {"watch", id, "--interval", "0.1"});
  EXPECT_EQ(w.exit_code, 0) << w.output << ctl->log();
}

namespace {

struct Row {
  std::string job_id, region;
  int64_t start_ms, end_ms;
  int nodes;
};

// The reservations table of the controller's SQLite file, read directly.
std::vector<Row> stored_reservations(const std::string& db_path) {
  sqlite3* db = nullptr;
  std::vector<Row> out;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    ADD_FAILURE() << "cannot open " << db_path;
    return out;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT job_id, region, start_ms, end_ms, nodes FROM reservations ORDER BY start_ms;", -1,
                         &st, nullptr) == SQLITE_OK)
    while (sqlite3_step(st) == SQLITE_ROW)
      out.push_back({reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                     reinterpret_cast<const char*>(sqlite3_column_text(st, 1)), sqlite3_column_int64(st, 2),
                     sqlite3_column_int64(st, 3), sqlite3_column_int(st, 4)});
  else
    ADD_FAILURE() << sqlite3_errmsg(db);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

json wait_scheduled(httplib::Client& c, const std::string& id) {
  json j;
  for (int i = 0; i < 3000; ++i) {
    auto r = c.Get("/v1/jobs/" + id);
    if (r && r->status == 200) {
      j = json::parse(r->body);
      if (j["state"] != "PENDING") return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return j;
}

}  // namespace

TEST(ControllerDurability, ReservationsSurviveAControllerSigkill) {
  Env e;
  // One node; the cleanest hour of the day is three hours from now, the
  // next cleanest the hour after it.
  const int64_t now_h = std::chrono::duration_cast<std::chrono::hours>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
  std::string hourly = "[";
  for (int h = 0; h < 24; ++h)
    hourly += (h ? ", " : "") + std::string(h == (now_h + 3) % 24 ? "10" : h == (now_h + 4) % 24 ? "20" : "500");
  std::ofstream(e.regions) << "regions:\n  - {name: DE, nodes: 1, hourly: " + hourly + "]}\n";
  const json s = {{"name", "later"},
                  {"worker", {{"data", {{"train", "succeed"}}}}},
                  {"regions", {"DE"}},
                  {"estimate", {{"duration_s", 3600}}},
                  {"max_delay_s", 8 * 3600}};
  std::string first;
  std::vector<Row> before;
  {
    auto ctl = e.start();
    httplib::Client c("127.0.0.1", ctl->port());
    c.set_bearer_token_auth(kUser);
    auto r = c.Post("/v1/jobs", s.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    first = json::parse(r->body)["id"];
    json j = wait_scheduled(c, first);
    ASSERT_EQ(j["state"], "SCHEDULED") << j.dump();
    ctl->kill(SIGKILL);
  }
  before = stored_reservations(e.data + "/controller.db");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].job_id, first);
  EXPECT_EQ(before[0].region, "DE");
  EXPECT_EQ(before[0].nodes, 1);
  EXPECT_EQ(before[0].end_ms - before[0].start_ms, carbon::kHourMs);
  EXPECT_GT(before[0].start_ms, (now_h + 1) * carbon::kHourMs - 1);
  // After the restart the plan is still held: the same job, wanting the same
  // clean hour, gets the next one.
  auto ctl = e.start();
  httplib::Client c("127.0.0.1", ctl->port());
  c.set_bearer_token_auth(kUser);
  json again = s;
  again["name"] = "also-later";
  auto r = c.Post("/v1/jobs", again.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string second = json::parse(r->body)["id"];
  json j = wait_scheduled(c, second);
  ASSERT_EQ(j["state"], "SCHEDULED") << j.dump();
  auto after = stored_reservations(e.data + "/controller.db");
  ASSERT_EQ(after.size(), 2u);
  const Row& a = after[0].job_id == first ? after[0] : after[1];
  const Row& b = after[0].job_id == first ? after[1] : after[0];
  EXPECT_EQ(a.start_ms, before[0].start_ms);  // the first plan, untouched
  EXPECT_EQ(b.job_id, second);
  EXPECT_EQ(b.start_ms, a.start_ms + carbon::kHourMs);
  EXPECT_TRUE(b.end_ms <= a.start_ms || a.end_ms <= b.start_ms) << "the plans overlap on the region's one node";
}
