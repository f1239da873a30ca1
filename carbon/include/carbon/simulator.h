// Policy simulator: replays a job trace over recorded intensity and compares
// placement policies.
//
// Model: a scheduling cycle runs at every boundary of the cycle step (every
// UTC hour on hourly data); jobs submitted during a step are placed in the
// cycle at its end (or at their submit time when it is a boundary). A
// decision is final unless SimConfig::replan_every is set. Forecasts come
// from SimConfig::forecaster, issued at the cycle time for every region, at
// the region's own step (forecast.h); emissions are always counted on the
// *actual* series (integrated at its own step, partial steps pro rata). A
// job that no region can finish by its deadline falls back to the earliest
// possible finish in its allowed regions (ignoring the deadline); it counts
// as a miss when that finish is after its deadline.
//
// Steps: the actual series may be 5-, 15-, 30- or 60-minute, each on its
// UTC grid (another step, or a series off its grid, is a CarbonError);
// regions may differ. The cycle step is the finest step among the regions'
// series, the rule placement follows for its slots (placement.h: a coarser
// forecast is expanded to the finest step). So a run on 30-minute data has
// a cycle every 30 minutes, placement picks 30-minute slots (runs and
// windows start on :00 or :30), and a job submitted at 12:10 is placed at
// 12:30 (at 13:00 on hourly data). Capacity stays per UTC hour (the
// ledger, placement.h); re-plans (replan_every) and the learned load
// (learn_expected_load) stay on whole hours. On hourly data nothing
// changes. FIFO on a sub-hourly series made by repeating each value of an
// hourly one gives the hourly run's windows and grams for jobs submitted on
// the hour; the carbon-aware policies may pick half hours in between (the
// prefer-earlier rule can favour a start between two hours).
//
// The spatio-temporal policy prices capacity by the load of past weeks
// (SimConfig::learn_expected_load), learned online from the simulation's
// own realized schedule, never from future jobs.
//
// Policies: the four placement policies (placement.h) plus kOracle, a
// capacity-relaxed lower bound with perfect knowledge: every job runs, slot
// by slot (slots of the cycle step: hours on hourly data), in the cleanest
// allowed region at the cleanest slots between its submit time and its
// deadline (as if interruptible and migratable for free).
#pragma once

#include "carbon/forecast.h"
#include "carbon/hardware.h"
#include "carbon/intensity.h"
#include "carbon/job.h"
#include "carbon/placement.h"
#include "carbon/replan.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace carbon {

enum class SimPolicy { kFifo, kTemporal, kSpatial, kSpatioTemporal, kOracle };
const char* sim_policy_name(SimPolicy p);       // "fifo", ..., "oracle"
SimPolicy parse_sim_policy(const std::string&); // throws listing the names

struct SimRegion {
  std::string zone;
  int capacity = 0;            // GPUs
  double pue = 1.2;
  HardwareProfile hardware;
};

struct SimConfig {
  std::vector<SimRegion> regions;
  std::map<std::string, IntensitySeries> actual;   // per zone (5/15/30/60-minute); must cover the trace
  std::shared_ptr<const Forecaster> forecaster;    // default: perfect
  PlacementOptions placement;                      // policy is overwritten per run
  // 0: decisions are final. N > 0: every N hours (on multiples of N h since
  // the epoch), jobs placed but not yet started are re-planned with fresh
  // forecasts: those whose inputs changed since their plan (replan.h:
  // select_replans -- a forecast revised beyond replan.forecast_threshold
  // (down over the job's span in one of its regions, or up where its plan
  // runs), capacity freed in one of its regions within its span, or
  // capacity lost where its plan runs: with capacity pricing, less free
  // capacity in an hour it reserves, jobs placed since) have their reservations released and
  // are placed again with the cycle's new jobs, earliest deadline first (a job
  // that no longer fits anew keeps its old plan when that is still free);
  // every other one keeps its plan and reservation untouched. The basis of
  // each plan (the forecasts and free capacity its pass saw) is kept in
  // memory. replan.incremental = false: every such job is placed again (a
  // full re-plan).
  Hours replan_every{0};
  ReplanOptions replan;
  // Capacity pricing for the spatio-temporal policy: learn
  // PlacementOptions::expected_load_by_hour_of_week from the load the
  // simulation has already realized (hours before the cycle: final), an
  // exponential average per hour of the week with weight
  // `load_learning_rate` for the newest week. Prices start once every hour
  // of the week has been seen. Off: the given placement options as they are.
  bool learn_expected_load = true;
  double load_learning_rate = 0.3;
  // Hindsight (bench only): every job submitted in a UTC block of this
  // length (blocks from unix time 0) joins the cycles at the block's start,
  // so one pass places each block's arrivals together, earliest deadline
  // first, as if known in advance (a job still never starts before its
  // submit time). 0: online, each job at its submit time, as the service.
  Hours hindsight_block{0};
};

struct JobOutcome {
  std::string job_id;
  std::string region;
  std::vector<Window> windows;
  double grams = 0;                 // actual operational + embodied
  double operational_grams = 0;
  double expected_grams = 0;        // what the forecast promised (NaN for oracle)
  double delay_h = 0;               // finish - (submit + duration)
  bool deadline_missed = false;
  bool fallback = false;            // placed ignoring the deadline
};

struct PolicyResult {
  SimPolicy policy{};
  std::string forecaster;
  std::string engine = "library";   // "library" (simulate) or "service" (the controller's scheduler)
  double total_grams = 0, operational_grams = 0, embodied_grams = 0;
  double saved_pct_vs_fifo = 0;     // filled by compare_policies
  int jobs = 0;
  int deadline_misses = 0;
  double mean_delay_h = 0, p95_delay_h = 0;
  std::map<std::string, double> gpu_hours_by_region;
  // Re-planning (SimConfig::replan_every), summed over every re-plan: held
  // plans placed again, and held plans left untouched (incremental only).
  long replan_placed = 0, replan_untouched = 0;
  std::vector<JobOutcome> outcomes;   // in trace order
};

// Runs one policy. Throws CarbonError when a zone's actual series is missing
// or does not cover the trace plus the look-ahead.
PolicyResult simulate(const std::vector<Job>& trace, const SimConfig& config, SimPolicy policy);

// Scores placements made by another engine over the same trace and config
// (the controller's own scheduler replaying the trace: controller/tools/sim_engine.h):
// outcomes[i] must hold job i's region and run windows (job_id,
// expected_grams and fallback as that engine saw them); grams are counted on
// the actual series exactly as simulate() counts its own. Throws CarbonError
// when sizes differ or a job has no window.
PolicyResult score_placements(const std::vector<Job>& trace, const SimConfig& config, SimPolicy policy,
                              std::string forecaster, std::string engine, std::vector<JobOutcome> outcomes);
// Actual grams, delay and deadline miss of one placed job (o.region, o.windows).
void account_placement(const SimConfig& config, const Job& job, JobOutcome& o);

// Runs each policy (FIFO is always run first as the baseline) and fills
// saved_pct_vs_fifo.
std::vector<PolicyResult> compare_policies(const std::vector<Job>& trace, const SimConfig& config,
                                           const std::vector<SimPolicy>& policies);

// Plain-text table (one row per policy) and CSV with the same columns.
std::string format_results_table(const std::vector<PolicyResult>& results);
std::string results_csv(const std::vector<PolicyResult>& results);
// Per-region GPU-hours table (rows: regions, columns: policies).
std::string format_region_load_table(const std::vector<PolicyResult>& results,
                                     const std::vector<std::string>& zones);

// SVG: intensity per region over [week_start, week_start + 7 days) with the
// run windows of `result`'s jobs that overlap the week drawn on their region.
std::string render_week_svg(const SimConfig& config, const PolicyResult& result, Time week_start);

}  // namespace carbon
