// libFuzzer target for the whole request path: raw bytes, as one connection
// sent them, through the HTTP edge's framing (controller/api/http_edge.cpp) and
// the API's routes, authentication, parsers and renderers
// (controller/api/api.cpp) to the bytes written back. A real store (SQLite in a
// temporary directory), registry and scheduler stand behind it; the only
// shortcut is a fixed tokens file (user, admin and worker tokens that the
// seeds use). The scheduler never cycles, so nothing is launched.
//
// Invariants: the server never crashes, every answer is an HTTP/1.1 status
// line, and no input makes it answer 500 (an exception the API did not
// turn into a 4xx).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <unistd.h>

#include "controller/api/api.h"
#include "controller/config/config_files.h"
#include "controller/executors/executor_local.h"

namespace {

struct World {
  std::string dir;
  controller::ManualClock clock{1764633600000};
  controller::Auth auth = controller::Auth::from_text(
      "fuzz-user-token-0000001,team-a,user\nfuzz-admin-token-000001,ops,admin\nfuzz-worker-token-00001,team-a,worker\n");
  controller::Metrics metrics;
  std::unique_ptr<controller::Store> store;
  std::unique_ptr<controller::Registry> registry;
  std::unique_ptr<controller::Executor> local;
  std::vector<controller::RegionConfig> regions;
  std::unique_ptr<controller::Scheduler> sched;
  std::unique_ptr<controller::ApiServer> api;

  World() {
    const char* shm = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string tmpl = std::string(shm) + "/gs-fuzz-http-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    dir = tmpl;
    store = std::make_unique<controller::Store>(dir + "/c.db");
    registry = std::make_unique<controller::Registry>(*store, clock, controller::RegistryOptions{500});
    registry->load();
    controller::LocalExecutorOptions lo;
    lo.worker_path = "/nonexistent/greenshard-worker";
    lo.data_dir = dir;
    local = controller::make_local_executor(lo);
    regions = controller::parse_regions_yaml(
        "regions:\n  - {name: DE, nodes: 2, intensity: 300, pue: 1.2}\n  - {name: FR, nodes: 1, intensity: 50}\n",
        "fuzz");
    std::map<std::string, controller::Executor*> ex;
    for (auto& r : regions) ex[r.name] = local.get();
    sched = std::make_unique<controller::Scheduler>(*registry, clock, regions, ex, &metrics,
                                                    controller::SchedulerOptions{});
    controller::ApiOptions ao;
    ao.store = store.get();
    ao.threads = 1;
    ao.edge.stream_workers = 1;
    api = std::make_unique<controller::ApiServer>(*registry, *sched, auth, metrics, ao);
  }
  ~World() { std::filesystem::remove_all(dir); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* w = new World();  // one world for the whole run (its store grows)
  const std::string out = w->api->serve_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  for (size_t pos = out.find("HTTP/1.1 "); pos != std::string::npos; pos = out.find("\r\nHTTP/1.1 ", pos + 1)) {
    const size_t at = out.compare(pos, 2, "\r\n") == 0 ? pos + 2 : pos;
    if (out.compare(at + 9, 3, "500") == 0) std::abort();  // an unhandled error
  }
  if (!out.empty() && out.rfind("HTTP/1.1 ", 0) != 0) std::abort();
  return 0;
}
