// The service engine of the policy simulator: replays a job trace through
// the controller's own Scheduler -- the code the service runs, not a copy.
//
//   clock     a ManualClock moved step by step: one scheduling cycle at
//             every boundary of the finest step among the regions' series
//             in `catalog` (every UTC hour on hourly data, every 30 minutes
//             on 30-minute data), as carbon::simulate models it; jobs
//             submitted during a step are submitted to the Registry at
//             their submit time and placed in the cycle at its end;
//   store     a real SQLite store (":memory:" or a temporary file);
//   regions   one per SimConfig region: a node is one server of its
//             hardware profile (capacity = GPUs / resources_per_server),
//             intensity from the file source over `catalog` with the named
//             forecaster (make_file_intensity_source: the service's path,
//             at each zone's own step; "perfect" is replay of the recorded
//             year);
//   jobs      nodes = GPUs / resources_per_server, power = the server's
//             power at the job's utilization, deadline as in the trace;
//   executor  SimExecutor: gangs run for their duration on the clock.
// The outcome of each job is its region and the windows its gang really
// ran, scored by carbon::score_placements exactly as carbon::simulate
// scores its own.
// Sub-hourly data: with cycles within an hour, the two engines learn an
// hour's realized load (capacity pricing) differently -- the service's is
// the hour's last cycle's (a job that ended earlier in the hour no longer
// counts), the library's every window that overlapped the hour -- so with
// capacity pricing on, their spatio-temporal decisions may differ slightly;
// without it they agree job by job (tested), as on hourly data with it.
#pragma once

#include <carbon/catalog.h>
#include <carbon/placement.h>
#include <carbon/simulator.h>

#include <cstdint>
#include <string>
#include <vector>

namespace controller {

struct ServiceSimOptions {
  carbon::Policy policy = carbon::Policy::kSpatioTemporal;
  std::string forecaster = "perfect";   // carbon::make_forecaster name
  std::uint64_t seed = 1;               // for "<name>+noise<pct>"
  int64_t replan_period_ms = 0;         // SchedulerOptions::replan_period_ms
  std::string store_path = ":memory:";  // SQLite file for the job store
  bool progress = false;                // a line to stderr every simulated week
};

struct ServiceSimStats {
  int64_t cycles = 0;
  int64_t hours = 0;     // cycles on an hour boundary (= cycles on hourly data)
  double wall_s = 0;
  int64_t store_commits = 0;
};

// Replays `trace` (carbon::Job, any order) with `config`'s regions, placement
// options (policy overwritten by options.policy) and capacity pricing
// settings. Returns one outcome per job, in trace order. Throws
// std::runtime_error when a job's GPUs are not whole servers, a zone is not
// in `catalog`, or jobs are still unfinished 60 days after the last submit.
std::vector<carbon::JobOutcome> replay_through_scheduler(const std::vector<carbon::Job>& trace,
                                                         const carbon::SimConfig& config,
                                                         const carbon::Catalog& catalog,
                                                         const ServiceSimOptions& options,
                                                         ServiceSimStats* stats = nullptr);

// replay_through_scheduler, scored: a PolicyResult with engine "service".
carbon::PolicyResult simulate_service(const std::vector<carbon::Job>& trace, const carbon::SimConfig& config,
                                      const carbon::Catalog& catalog, const ServiceSimOptions& options,
                                      ServiceSimStats* stats = nullptr);

}  // namespace controller
