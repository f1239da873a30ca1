// An in-process controller (store in a temp dir, real HTTP server on a
// loopback port, local executor running real processes) for the API and
// scheduler tests.
#pragma once

#include <httplib.h>

#include <fstream>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <thread>

#include "common/spawn.h"
#include "controller/api/api.h"
#include "controller/config/config_files.h"
#include "controller/executors/executor_local.h"

namespace ctltest {

inline const char* kUserA = "user-token-team-a-0001";
inline const char* kUserB = "user-token-team-b-0001";
inline const char* kAdmin = "admin-token-ops-000001";
inline const char* kWorker = "worker-token-000000001";

inline std::string tokens_text() {
  return std::string(kUserA) + ",team-a,user\n" + kUserB + ",team-b,user\n" + kAdmin + ",ops,admin\n" +
         kWorker + ",team-a,worker\n";
}

inline void write_file(const std::string& path, const std::string& text, bool exec = false) {
  std::ofstream(path) << text;
  if (exec) ::chmod(path.c_str(), 0755);
}

struct Options {
  std::string worker_script = "#!/bin/sh\necho \"hello from rank $RANK of $WORLD_SIZE\"\nexit 0\n";
  size_t max_body = controller::kMaxBodyBytes;
  int max_live = 40;
  std::string regions_yaml =
      "regions:\n  - {name: DE, nodes: 2, intensity: 300, pue: 1.2}\n  - {name: FR, nodes: 1, intensity: 50}\n";
  int64_t backoff_ms = 50;
  int64_t grace_ms = 2000;
  std::string quotas_yaml;  // controller/config/quota.h; empty: no quotas
};

class Controller {
 public:
  explicit Controller(Options o = {})
      : opt(o), clock(1764633600000), auth(controller::Auth::from_text(tokens_text())) {
    write_file(dir.file("worker.sh"), o.worker_script, true);
    store = std::make_unique<controller::Store>(dir.file("c.db"));
    registry = std::make_unique<controller::Registry>(*store, clock, controller::RegistryOptions{o.max_live});
    registry->load();
    controller::LocalExecutorOptions lo;
    lo.worker_path = dir.file("worker.sh");
    lo.data_dir = dir.path();
    local = controller::make_local_executor(lo);
    regions = controller::parse_regions_yaml(o.regions_yaml, "test");
    std::map<std::string, controller::Executor*> ex;
    for (auto& r : regions) ex[r.name] = local.get();
    controller::SchedulerOptions so;
    so.backoff_base_ms = o.backoff_ms;
    so.stop_grace = std::chrono::milliseconds(o.grace_ms);
    if (!o.quotas_yaml.empty()) so.quotas = controller::parse_quota_yaml(o.quotas_yaml, "quotas", regions);
    sched = std::make_unique<controller::Scheduler>(*registry, clock, regions, ex, &metrics, so);
    controller::ApiOptions ao;
    ao.max_body_bytes = o.max_body;
    ao.threads = 8;
    api = std::make_unique<controller::ApiServer>(*registry, *sched, auth, metrics, ao);
    port = api->bind("127.0.0.1", 0);
    sched->set_status_url_base("http://127.0.0.1:" + std::to_string(port));
    server = std::thread([this] { api->serve(); });
  }
  ~Controller() {
    api->stop();
    server.join();
  }

  httplib::Client client(const std::string& token = "") const {
    httplib::Client c("127.0.0.1", port);
    if (!token.empty()) c.set_bearer_token_auth(token);
    c.set_read_timeout(std::chrono::seconds(30));
    return c;
  }

  // Runs scheduler cycles until pred() or `max` cycles (a cycle-count bound,
  // not a time bound); sleeps 20 ms between cycles so processes can run,
  // and moves the manual clock on by as much.
  template <class P>
  bool cycle_until(P pred, int max = 500) {
    for (int i = 0; i < max; ++i) {
      sched->cycle();
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      clock.advance_ms(20);
    }
    return false;
  }

  controller::JobState state(const std::string& id) const { return registry->get(id)->state(); }

  Options opt;
  gstest::TempDir dir;
  controller::ManualClock clock;
  controller::Auth auth;
  controller::Metrics metrics;
  std::unique_ptr<controller::Store> store;
  std::unique_ptr<controller::Registry> registry;
  std::unique_ptr<controller::Executor> local;
  std::vector<controller::RegionConfig> regions;
  std::unique_ptr<controller::Scheduler> sched;
  std::unique_ptr<controller::ApiServer> api;
  int port = 0;
  std::thread server;
};

inline nlohmann::json spec(const std::string& name = "demo") {
  return {{"name", name},
          {"worker", {{"data", {{"train", "t.bin"}}}, {"schedule", {{"steps", 5}}}}},
          {"regions", {"DE", "FR"}},
          {"home_region", "DE"},
          {"procs_per_node", 2}};
}

}  // namespace ctltest
