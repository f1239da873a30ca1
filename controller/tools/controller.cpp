// greenshard-controller: flags/env -> wiring -> listen.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <carbon/time_ms.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "controller/api/api.h"
#include "controller/config/config_files.h"
#include "controller/config/intensity_sources.h"
#include "controller/executors/executor_k8s.h"
#include "controller/executors/executor_local.h"
#include "controller/store/store.h"

using namespace controller;

namespace {

// "--data-dir D is in use by another controller (pid P; lock D/controller.lock)".
std::string busy_message(const std::string& data_dir, const DataDirBusy& e) {
  return "--data-dir " + data_dir + " is in use by another controller (" +
         (e.holder_pid > 0 ? "pid " + std::to_string(e.holder_pid) : std::string("pid unknown")) + "; lock " +
         e.lock_path + ")";
}

// The command that salvages what SQLite can still read of `file`.
std::string salvage(const std::string& file) {
  return "`sqlite3 " + file + " .recover | sqlite3 " + file + ".recovered` (then move it in place)";
}

// A corrupt store: the file, what SQLite said, and the way out
// (docs/controller.md, "Backup and restore").
std::string corrupt_message(const std::string& data_dir, const StoreCorrupt& e) {
  return std::string(e.what()) + "; run `greenshard-controller --check-store --data-dir " + data_dir +
         "` to see the damage, then restore " + e.file + " from a backup or salvage it with " + salvage(e.file) +
         " (docs/controller.md, \"Backup and restore\")";
}

// --check-store: the store of an existing --data-dir, checked offline under
// the directory's lock (never beside a running controller). Prints the
// result on stdout; 0 when it is sound, 1 when not (naming the file), 1 when
// the directory is busy or missing.
int run_check_store(std::string data_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(data_dir, ec)) {
    std::fprintf(stderr, "greenshard-controller: --data-dir %s: not a directory\n", data_dir.c_str());
    return 1;
  }
  data_dir = std::filesystem::canonical(data_dir, ec).string();
  const std::string file = data_dir + "/controller.db";
  try {
    DataDirLock lock(data_dir);
    if (!std::filesystem::exists(file, ec)) {
      std::printf("%s: NOT OK\n  no job store here (a controller creates it when it first starts)\n", file.c_str());
      return 1;
    }
    const StoreCheck r = Store::check(file);
    if (r.ok) {
      std::printf("%s: ok (schema version %d, %lld jobs)\n", file.c_str(), r.schema_version,
                  static_cast<long long>(r.jobs));
      return 0;
    }
    std::printf("%s: NOT OK\n", file.c_str());
    for (const auto& p : r.problems) std::printf("  %s\n", p.c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "greenshard-controller: --check-store: %s is damaged; restore it from a backup or "
                 "salvage it with %s (docs/controller.md, \"Backup and restore\")\n",
                 file.c_str(), salvage(file).c_str());
    return 1;
  } catch (const DataDirBusy& e) {
    std::fprintf(stderr, "greenshard-controller: --check-store: %s; stop it first\n",
                 busy_message(data_dir, e).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greenshard-controller: --check-store: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"greenshard-controller: REST job API, durable store, carbon-aware scheduler"};
  std::string host = "127.0.0.1", data_dir = "greenshard-data", tokens, regions_file, carbon_source_file,
              hardware_file, quotas_file, worker,
              tls_cert, tls_key, port_file, advertise, policy_name = "spatio-temporal";
  int port = 8080, cycle_ms = 1000, threads = 16, max_live = 100000;
  int64_t grace_ms = 30000, backoff_ms = 1000;
  app.add_option("--host", host, "address to listen on")->envname("GREENSHARD_HOST");
  app.add_option("--port", port, "port (0 = any free port; see --port-file)")
      ->check(CLI::Range(0, 65535))->envname("GREENSHARD_PORT");
  app.add_option("--port-file", port_file, "write the bound port here once listening");
  app.add_option("--data-dir", data_dir, "job store and local job files")->envname("GREENSHARD_DATA_DIR");
  app.add_option("--tokens", tokens, "tokens file: token,tenant,role per line (required to serve)")
      ->envname("GREENSHARD_TOKENS_FILE");
  bool check_store = false;
  app.add_flag("--check-store", check_store,
               "check the job store of --data-dir offline (PRAGMA integrity_check) and exit: 0 ok, 1 not");
  int tokens_poll_ms = int(kTokensPollDefault.count());
  app.add_option("--tokens-poll-ms", tokens_poll_ms,
                 "check the tokens file for changes this often (0 = reload on SIGHUP only)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--regions", regions_file, "regions YAML (default: one local region)")
      ->envname("GREENSHARD_REGIONS_FILE");
  app.add_option("--carbon-source", carbon_source_file,
                 "carbon source YAML: file | carbon-aware-sdk | electricitymaps (default: the shipped 2023 data)")
      ->envname("GREENSHARD_CARBON_SOURCE_FILE");
  app.add_option("--hardware", hardware_file, "hardware YAML: regions: {<region>: <carbon/ hardware profile>}")
      ->envname("GREENSHARD_HARDWARE_FILE");
  app.add_option("--quotas", quotas_file,
                 "quotas YAML: per-tenant nominal quotas of nodes/GPUs per region (default: none)")
      ->envname("GREENSHARD_QUOTAS_FILE");
  app.add_option("--worker", worker, "greenshard-worker binary (default: next to this one)");
  app.add_option("--tls-cert", tls_cert, "PEM certificate (HTTPS when given with --tls-key)");
  app.add_option("--tls-key", tls_key, "PEM private key");
  app.add_option("--cycle-ms", cycle_ms, "scheduler period")->check(CLI::Range(10, 600000));
  app.add_option("--stop-grace-ms", grace_ms, "SIGTERM -> SIGKILL grace")->check(CLI::Range(int64_t(0), carbon::kHourMs));
  app.add_option("--backoff-ms", backoff_ms, "first restart backoff (doubles)")->check(CLI::Range(int64_t(0), carbon::kHourMs));
  // Defaults: SchedulerOptions's (greenshard-sim's too).
  const SchedulerOptions scheduler_defaults;
  int lookahead_h = int(scheduler_defaults.placement.max_lookahead.count()),
      replan_s = int(scheduler_defaults.replan_period_ms / 1000);
  app.add_option("--policy", policy_name,
                 "placement policy: spatio-temporal (carbon-aware), fifo (run now at home, the baseline), "
                 "temporal, spatial")
      ->check(CLI::IsMember({"spatio-temporal", "fifo", "temporal", "spatial"}))
      ->envname("GREENSHARD_POLICY");
  app.add_option("--lookahead-hours", lookahead_h, "how far ahead placement plans (and forecasts are asked for)")
      ->check(CLI::Range(1, 168))->envname("GREENSHARD_LOOKAHEAD_HOURS");
  app.add_option("--replan-seconds", replan_s, "re-plan jobs not started yet this often (0 = never)")
      ->check(CLI::Range(0, 7 * 24 * 3600))->envname("GREENSHARD_REPLAN_SECONDS");
  double replan_threshold = scheduler_defaults.replan.forecast_threshold;
  bool full_replan = !scheduler_defaults.replan.incremental;
  app.add_option("--replan-forecast-threshold", replan_threshold,
                 "a re-plan places a not-started job again when a forecast was revised by more than this "
                 "fraction (0.05 = 5 %): down in one of its regions within its span, or up where its plan runs")
      ->check(CLI::Range(0.0, 100.0))->envname("GREENSHARD_REPLAN_FORECAST_THRESHOLD");
  app.add_flag("--full-replan", full_replan,
               "every re-plan places every job not started yet again (default: only those whose inputs changed)")
      ->envname("GREENSHARD_FULL_REPLAN");
  app.add_option("--threads", threads, "HTTP worker threads (requests that are complete; http_edge.h)")
      ->check(CLI::Range(1, 1024));
  // The HTTP edge (controller/api/http_edge.h): connections, deadlines, queues.
  HttpEdgeOptions edge;
  int stream_workers = edge.stream_workers, max_queue = int(edge.max_queue),
      max_connections = int(edge.max_connections);
  int header_timeout_ms = int(edge.header_timeout.count()), body_timeout_ms = int(edge.body_timeout.count()),
      idle_timeout_ms = int(edge.idle_timeout.count()), write_timeout_ms = int(edge.write_timeout.count());
  app.add_option("--stream-workers", stream_workers, "threads for log streams (logs?follow); 503 beyond")
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-queue", max_queue, "complete requests waiting for a worker; 503 beyond")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--max-connections", max_connections, "open connections; 503 beyond (also capped by RLIMIT_NOFILE)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--header-timeout-ms", header_timeout_ms, "a request head must arrive within this (408)")
      ->check(CLI::Range(100, 600000));
  app.add_option("--body-timeout-ms", body_timeout_ms, "a request body must arrive within this of its head (408)")
      ->check(CLI::Range(100, 600000));
  app.add_option("--idle-timeout-ms", idle_timeout_ms, "a kept-alive connection silent this long is closed")
      ->check(CLI::Range(int64_t(100), carbon::kHourMs));
  app.add_option("--write-timeout-ms", write_timeout_ms, "each write of a response must progress within this")
      ->check(CLI::Range(100, 600000));
  app.add_option("--max-live-per-tenant", max_live, "unfinished jobs per tenant (429 beyond)")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--advertise-url", advertise, "URL workers use to reach this controller");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (check_store) return run_check_store(data_dir);
  if (tokens.empty()) {
    std::fprintf(stderr, "greenshard-controller: --tokens is required (or GREENSHARD_TOKENS_FILE)\n");
    return 2;
  }

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);  // reload the tokens file
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  try {
    std::filesystem::create_directories(data_dir);
    data_dir = std::filesystem::canonical(data_dir).string();
    // One controller per store: taken before anything reads the store, held
    // until exit (the kernel drops it however the process ends).
    const DataDirLock lock(data_dir);
    if (worker.empty()) {
      auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
      for (auto cand : {self / "greenshard-worker", self.parent_path() / "worker" / "greenshard-worker"})
        if (std::filesystem::exists(cand)) { worker = cand.string(); break; }
      if (worker.empty()) worker = "/usr/local/bin/greenshard-worker";
    }
    Auth auth = Auth::load_file(tokens);
    auto regions = regions_file.empty() ? default_regions() : load_regions_file(regions_file);
    if (!hardware_file.empty()) load_hardware_file(hardware_file, regions);
    QuotaConfig quotas;
    if (!quotas_file.empty()) quotas = load_quota_file(quotas_file, regions);
    std::unique_ptr<IntensitySource> intensity;
    bool live_source = false;
    if (!carbon_source_file.empty()) {
      CarbonSourceConfig cs = load_carbon_source_file(carbon_source_file);
      intensity = make_intensity_source(cs);
      live_source = cs.source != "file";
      if (cs.source == "carbon-aware-sdk" && !cs.api_key.empty())
        std::fprintf(stderr, "greenshard-controller: warning: %s: api_key_file: carbon/'s Carbon Aware SDK client "
                     "sends no key; the key is not used\n", carbon_source_file.c_str());
      std::fprintf(stderr, "greenshard-controller: carbon source %s%s%s%s\n", cs.source.c_str(),
                   cs.url.empty() ? "" : " ", cs.url.c_str(),
                   cs.source == "file" ? (" (forecast " + cs.forecaster + ")").c_str() : "");
    }
    Store store(data_dir + "/controller.db");
    SystemClock clock;
    Registry registry(store, clock, RegistryOptions{max_live});
    registry.load();
    Metrics metrics;
    AuthReloadOptions aro;
    aro.poll = std::chrono::milliseconds(tokens_poll_ms);
    aro.on_reload = [&metrics](bool ok) { metrics.auth_reloaded(ok); };
    AuthReloader auth_reloader(auth, tokens, aro);

    for (size_t i = 0; i < regions.size(); ++i) {
      if (regions[i].zone.empty()) continue;
      if (!intensity) intensity = make_carbon_intensity_source();
      try {
        intensity->forecast(regions[i].zone, clock.now_ms(), 1);  // validates the zone now
      } catch (const std::exception& e) {
        // A live source that does not answer yet is no configuration error:
        // the region takes no job until it does (regions.h, snapshot_regions).
        if (!live_source)
          throw std::runtime_error((regions_file.empty() ? std::string("regions") : regions_file) + ": regions[" +
                                   std::to_string(i) + "].zone: " + e.what());
        std::fprintf(stderr, "greenshard-controller: warning: regions[%zu] (%s): %s\n", i,
                     regions[i].name.c_str(), e.what());
      }
    }

    // The slim controller image has no worker: say so at start, not only
    // when the first job placed in a local region fails to launch.
    std::string local_names;
    for (const auto& r : regions)
      if (r.executor == "local") local_names += (local_names.empty() ? "" : ", ") + r.name;
    if (!local_names.empty() && ::access(worker.c_str(), X_OK) != 0)
      std::fprintf(stderr, "greenshard-controller: warning: --worker %s: %s; jobs placed in local region(s) %s "
                   "will fail to launch\n", worker.c_str(), std::strerror(errno), local_names.c_str());

    LocalExecutorOptions lo;
    lo.worker_path = worker;
    lo.data_dir = data_dir;
    auto local = make_local_executor(lo);
    std::vector<std::unique_ptr<Executor>> kube;
    std::map<std::string, Executor*> executors;
    for (const auto& r : regions) {
      if (r.executor == "local") executors[r.name] = local.get();
      else {
        kube.push_back(make_kubernetes_executor(r.kube, std::chrono::milliseconds(grace_ms),
                                                worker_defaults_from_env()));
        executors[r.name] = kube.back().get();
      }
    }

    ApiOptions ao;
    ao.threads = threads;
    ao.edge = edge;
    ao.edge.stream_workers = stream_workers;
    ao.edge.max_queue = size_t(max_queue);
    ao.edge.max_connections = size_t(max_connections);
    ao.edge.header_timeout = std::chrono::milliseconds(header_timeout_ms);
    ao.edge.body_timeout = std::chrono::milliseconds(body_timeout_ms);
    ao.edge.idle_timeout = std::chrono::milliseconds(idle_timeout_ms);
    ao.edge.write_timeout = std::chrono::milliseconds(write_timeout_ms);
    ao.tls_cert = tls_cert;
    ao.tls_key = tls_key;
    ao.store = &store;  // GET /v1/jobs/{id}: decisions
    ao.intensity = intensity.get();  // GET /v1/regions/{name}/intensity
    SchedulerOptions so;
    so.stop_grace = std::chrono::milliseconds(grace_ms);
    so.backoff_base_ms = backoff_ms;
    so.intensity = intensity.get();
    so.placement.policy = policy_name == "fifo"       ? carbon::Policy::kRunNowHome
                          : policy_name == "temporal" ? carbon::Policy::kTemporal
                          : policy_name == "spatial"  ? carbon::Policy::kSpatial
                                                      : carbon::Policy::kSpatioTemporal;
    so.placement.max_lookahead = carbon::Hours{lookahead_h};
    so.replan_period_ms = int64_t(replan_s) * 1000;
    so.replan.incremental = !full_replan;
    so.replan.forecast_threshold = replan_threshold;
    so.quotas = std::move(quotas);
    Scheduler sched(registry, clock, regions, executors, &metrics, so);
    metrics.on_render([&] {
      metrics.set_region_intensities(sched.regions_now(), clock.now_ms());
      if (intensity) metrics.set_forecast_stats(sched.region_configs(), *intensity);
    });
    ApiServer api(registry, sched, auth, metrics, ao);
    const int bound = api.bind(host, port);
    const std::string scheme = api.tls() ? "https" : "http";
    sched.set_status_url_base(
        advertise.empty()
            ? scheme + "://" + (host == "0.0.0.0" ? std::string("127.0.0.1") : host) + ":" + std::to_string(bound)
            : advertise);
    sched.recover();
    sched.cycle();
    std::thread sched_thread([&] { sched.run(std::chrono::milliseconds(cycle_ms)); });
    std::thread signal_thread([&] {
      int sig = 0;
      while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) {  // the tokens file, and the TLS pair
        auth_reloader.request_reload();
        api.reload_tls();
      }
      std::fprintf(stderr, "greenshard-controller: signal %d, shutting down\n", sig);
      api.stop();
    });
    if (!port_file.empty()) {
      std::string tmp = port_file + ".tmp";
      std::ofstream(tmp) << bound << "\n";
      std::filesystem::rename(tmp, port_file);
    }
    std::fprintf(stderr, "greenshard-controller: listening on %s://%s:%d (policy %s, %zu regions, %lld jobs)\n",
                 scheme.c_str(), host.c_str(), bound, sched.policy_name().c_str(), regions.size(),
                 static_cast<long long>(registry.size()));
    std::fprintf(stderr, "greenshard-controller: placement: %s\n", describe_placement_settings(so).c_str());
    api.serve();
    sched.stop();
    sched_thread.join();
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return 0;
  } catch (const DataDirBusy& e) {
    std::fprintf(stderr, "greenshard-controller: %s\n", busy_message(data_dir, e).c_str());
    return 1;
  } catch (const StoreCorrupt& e) {
    std::fprintf(stderr, "greenshard-controller: %s\n", corrupt_message(data_dir, e).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greenshard-controller: %s\n", e.what());
    return 1;
  }
}
