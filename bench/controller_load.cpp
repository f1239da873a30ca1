// bench_controller_load: POST /v1/jobs throughput and latency against a
// greenshard-controller (API server, registry, scheduler, local executor)
// whose job store is the durable SQLite file (WAL, synchronous=FULL: every
// acknowledged submission is fsync'd) in a temp dir on this machine's disk.
// Load generators are keep-alive HTTP clients on loopback, each submitting
// back to back; every run is bounded by a count and a time limit.
//
//   bench_controller_load [--clients 1,4,16,32] [--requests 6000] [--seconds 20]
//
// Prints an nccl-tests style table and ends with
//   RESULT controller_load submits_per_s=<x> p50_ms=<x> p99_ms=<x> durable=<0|1>
// (durable=1: every acknowledged job was read back from the SQLite file)
// for the configuration with the highest throughput whose p99 <= 10 ms (or
// the highest throughput when none meets it).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "controller/api.h"

using namespace controller;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Row {
  int clients = 0;
  int64_t ok = 0, errors = 0;
  double seconds = 0, rate = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t commits = 0;
};

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())));
  std::nth_element(v.begin(), v.begin() + long(i), v.end());
  return v[i];
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) {
    int v = std::atoi(x.c_str());
    if (v < 1 || v > 1024) {
      std::fprintf(stderr, "bench_controller_load: --clients: '%s' is not in [1, 1024]\n", x.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> clients = {1, 4, 16, 32};
  int64_t requests = 6000;
  double seconds = 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_controller_load: %s: needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--clients") clients = parse_list(next());
    else if (a == "--requests") requests = std::atoll(next().c_str());
    else if (a == "--seconds") seconds = std::atof(next().c_str());
    else {
      std::fprintf(stderr, "bench_controller_load: unknown flag '%s'\n", a.c_str());
      return 2;
    }
  }
  if (requests < 1 || !(seconds > 0)) {
    std::fprintf(stderr, "bench_controller_load: --requests and --seconds must be positive\n");
    return 2;
  }

  // The controller, as greenshard-controller wires it, on a fresh data dir.
  char tmpl[] = "/tmp/gs-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const char* token = "bench-token-0000000001";
  Auth auth = Auth::from_text(std::string(token) + ",bench,user\n");
  Store store(dir + "/controller.db");
  SystemClock clock;
  Registry registry(store, clock);
  registry.load();
  Metrics metrics;
  LocalExecutorOptions lo;
  lo.worker_path = "/bin/true";
  lo.data_dir = dir;
  auto local = make_local_executor(lo);
  auto regions = parse_regions_yaml(
      "regions:\n  - {name: DE, nodes: 4, intensity: 300}\n  - {name: FR, nodes: 4, intensity: 60}\n", "bench");
  SchedulerOptions so;
  Scheduler sched(registry, clock, regions, {{"DE", local.get()}, {"FR", local.get()}}, &metrics, so);
  ApiOptions ao;
  ao.threads = 64;
  ApiServer api(registry, sched, auth, metrics, ao);
  const int port = api.bind("127.0.0.1", 0);
  sched.set_status_url_base("http://127.0.0.1:" + std::to_string(port));
  std::thread server([&] { api.serve(); });
  std::thread scheduler([&] { sched.run(std::chrono::milliseconds(1000)); });

  const std::string body =
      R"({"name":"bench","worker":{"data":{"train":"t.bin"},"schedule":{"steps":10}},"regions":["DE","FR"],"procs_per_node":1,"max_delay_s":3600})";

  std::printf("# controller_load: POST /v1/jobs on loopback, durable SQLite store (WAL, synchronous=FULL) in %s\n",
              dir.c_str());
  std::printf("# %d CPUs; each row: at most %lld submissions or %.0f s\n#\n", int(std::thread::hardware_concurrency()),
              static_cast<long long>(requests), seconds);
  std::printf("# %7s %9s %7s %8s %11s %8s %8s %8s %8s %8s %10s\n", "clients", "submits", "errors", "time_s",
              "submits/s", "p50_ms", "p90_ms", "p99_ms", "max_ms", "commits", "jobs/fsync");

  std::vector<Row> rows;
  for (int n : clients) {
    Row row;
    row.clients = n;
    std::atomic<int64_t> issued{0};
    std::vector<std::vector<double>> lat(static_cast<size_t>(n));
    std::atomic<int64_t> errors{0};
    std::mutex err_mu;
    std::string first_error;
    const int64_t commits0 = store.commits();
    const auto t0 = SteadyClock::now();
    const auto deadline = t0 + std::chrono::duration<double>(seconds);
    std::vector<std::thread> ts;
    for (int c = 0; c < n; ++c)
      ts.emplace_back([&, c] {
        httplib::Client cli("127.0.0.1", port);
        cli.set_bearer_token_auth(token);
        cli.set_keep_alive(true);
        cli.set_tcp_nodelay(true);
        httplib::Headers h;
        while (issued.fetch_add(1) < requests && SteadyClock::now() < deadline) {
          auto a = SteadyClock::now();
          auto r = cli.Post("/v1/jobs", h, body, "application/json");
          auto b = SteadyClock::now();
          if (r && r->status == 201) lat[size_t(c)].push_back(std::chrono::duration<double, std::milli>(b - a).count());
          else {
            if (errors++ == 0) {
              std::lock_guard<std::mutex> l(err_mu);
              first_error = r ? "HTTP " + std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
            }
          }
        }
      });
    for (auto& t : ts) t.join();
    row.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    row.ok = int64_t(all.size());
    row.errors = errors;
    row.rate = double(row.ok) / row.seconds;
    row.p50 = pct(all, 50);
    row.p90 = pct(all, 90);
    row.p99 = pct(all, 99);
    row.max = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
    row.commits = store.commits() - commits0;
    std::printf("  %7d %9lld %7lld %8.2f %11.1f %8.3f %8.3f %8.3f %8.3f %8lld %10.2f\n", n,
                static_cast<long long>(row.ok), static_cast<long long>(row.errors), row.seconds, row.rate, row.p50,
                row.p90, row.p99, row.max, static_cast<long long>(row.commits),
                row.commits ? double(row.ok) / double(row.commits) : 0.0);
    if (!first_error.empty()) std::printf("#   first error: %s\n", first_error.c_str());
    std::fflush(stdout);
    rows.push_back(row);
  }

  // Every acknowledged job is in the store file (read back from SQLite).
  const int64_t acked = [&] {
    int64_t s = 0;
    for (auto& r : rows) s += r.ok;
    return s;
  }();
  api.stop();
  server.join();
  sched.stop();
  scheduler.join();
  const int64_t stored = int64_t(store.load_all().size());
  std::printf("#\n# acknowledged %lld, in the store %lld\n", static_cast<long long>(acked),
              static_cast<long long>(stored));
  local.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  const Row* best = nullptr;
  for (auto& r : rows)
    if (r.p99 <= 10.0 && r.errors == 0 && (!best || r.rate > best->rate)) best = &r;
  if (!best)
    for (auto& r : rows)
      if (!best || r.rate > best->rate) best = &r;
  std::printf("# headline: %d clients\n", best->clients);
  // durable=1 only when every acknowledged submission was read back from
  // the SQLite file after the server stopped.
  const int durable = stored >= acked ? 1 : 0;
  std::printf("RESULT controller_load submits_per_s=%.1f p50_ms=%.3f p99_ms=%.3f durable=%d\n", best->rate, best->p50,
              best->p99, durable);
  return durable ? 0 : 1;
}
