// Spatio-temporal placement: where and when a job should run.
//
// place() is a pure function of (job, regions, planned capacity, now,
// options): no clock reads, no I/O. Time is quantized to slots: slot 0 is
// the slot containing `now`; a run starting in slot 0 starts at `now`.
//
// Slots: the slot is the regions' forecast step -- hourly unless a forecast
// is sub-hourly. Steps of 5, 15, 30 and 60 minutes are accepted (each on its
// UTC grid); they nest, so when regions differ the pass uses the finest step
// among them and a coarser forecast is expanded to it exactly (each value
// repeated over the finer slots of its step). A region whose forecast has
// any other step is refused with a reason naming the step ("forecast step of
// 20 min is not supported ..."). So on 30-minute data a run, and every
// window of an interruptible job, starts and ends on a half hour (the last
// window ends when the work is done; no plan ends with a window that would
// hold only its resume overhead, the windows before it already doing all
// the work). With only hourly forecasts nothing changes: slots are UTC
// hours. max_lookahead, capacity_by_hour, the 24 h forecast extension and
// the capacity pricing profile stay in hours.
//
// Capacity stays per UTC hour (CapacityLedger, Region::capacity_by_hour):
// every slot of an hour has that hour's capacity and planned usage, and a
// window reserves every whole hour it overlaps (a 30-minute window at 12:30
// holds its GPUs for 12:00-13:00 in the ledger and in the rest of the pass).
// Conservative: capacity is never over-committed; two half-hour jobs that
// would fit one after the other in a full hour do not share it.
//
// Cost of a candidate = expected operational grams (hardware power x PUE x
// forecast intensity, pro rata for a partial last hour, plus for
// interruptible jobs the resume overhead of every extra window) + embodied
// grams (SCI M for the GPU-hours reserved). This is what Decision reports.
//
// Ranking (kTemporal, kSpatioTemporal): candidates are ranked by a score =
// the same cost, except that with capacity pricing on
// (PlacementOptions::expected_load_by_hour_of_week non-empty) each hour's
// intensity is replaced by intensity + capacity_price_weight *
// E[max(0, theta - intensity)], theta being that hour's marginal intensity
// over a band of loads (see PlacementOptions). Near ties go to the earlier start: a candidate starting
// later wins only if its score is more than prefer_earlier_within (default
// 5 %) below the earlier one's, and an earlier one wins while its score is
// at most that fraction above; equal starts: the lower score, then region
// order. So the winner is not always the cheapest in grams. kRunNowHome and
// kSpatial rank by earliest start, then lower grams.
//
// Feasible: region allowed and known; free capacity (capacity - planned) >=
// job.gpus in every reserved hour (every hour a slot of the run overlaps); the run ends by job.deadline. Forecasts
// shorter than the search window are extended by repeating their last 24
// hours (seasonal-naive), which the explanation mentions.
//
// Policies restrict the search:
//   kRunNowHome      home region, earliest hour with capacity (FIFO)
//   kTemporal        home region, any start (or windows) before the deadline
//   kSpatial         any allowed region, earliest hour with capacity there
//   kSpatioTemporal  any allowed region, any start (or windows) -- ours
// kRunNowHome and kSpatial ignore the deadline when choosing (they are the
// carbon-agnostic / latency-first baselines) but still report a miss.
#pragma once

#include "carbon/capacity.h"
#include "carbon/hardware.h"
#include "carbon/intensity.h"
#include "carbon/job.h"

#include <string>
#include <utility>
#include <vector>

namespace carbon {

struct Region {
  std::string name;                  // zone id
  int capacity = 0;                  // resources (GPUs) in the region
  std::vector<int> capacity_by_hour; // optional: capacity of hour i after floor_hour(now)
                                     // (beyond its end: `capacity`)
  double pue = 1.2;
  HardwareProfile hardware;
  IntensitySeries forecast;          // step 5, 15, 30 or 60 min (see Slots); must contain the slot of `now`
};

struct Window {
  Window() = default;
  Window(Time s, Time e, std::string r = {}, int g = 0) : start(s), end(e), region(std::move(r)), gpus(g) {}
  Time start{}, end{};               // [start, end)
  // Elastic and migratable jobs: where and how wide this window runs
  // ("" / 0: the decision's region, the job's gpus).
  std::string region;
  int gpus = 0;
};

// What changes between two consecutive windows of an elastic or migratable
// job, and why placement chose it.
struct PlanChange {
  Time at{};                          // start of the later window
  std::string from_region, to_region; // equal: no move
  int from_gpus = 0, to_gpus = 0;     // equal: no resize
  bool resize() const { return from_gpus != to_gpus; }
  bool move() const { return from_region != to_region; }
  double cost_grams = 0;              // the change's own grams (save + restore, network)
  double saved_grams = 0;             // expected grams avoided vs keeping the previous region and width (may be < 0)
  std::string why;                    // one sentence
};

// The cost of changing an elastic or migratable job's width or region,
// stated and configurable. Every change (resize, move, or resume after a
// pause) costs Job::resume_overhead of run time at the new width: SIGTERM,
// checkpoint save, relaunch, restore, as the interruptible jobs' windows
// already do. A move also sends the checkpoint to the other region: it
// takes checkpoint_gb / network_gb_per_s more seconds and
// checkpoint_gb * network_kwh_per_gb kWh at the mean intensity of the two
// regions in that hour.
struct ElasticCosts {
  double checkpoint_gb_per_gpu = 10;   // Job::checkpoint_gb when 0: this x gpus
  double network_gb_per_s = 1.25;      // 10 Gbit/s between regions
  double network_kwh_per_gb = 0.06;    // Aslan et al. 2018 (2015 figure; conservative)
  Hours min_hold{2};                   // at most one change per min_hold (windows are whole blocks)
};

// The one formula for a change's costs, used by placement (forecast) and
// the simulator (actual): the checkpoint's size in GB, the run time a change
// to a window costs (resume_overhead, plus the transfer for a move), and a
// move's network grams at the two regions' intensities (gCO2/kWh).
double checkpoint_gb(const Job& job, const ElasticCosts& costs);
Seconds change_overhead(const Job& job, const ElasticCosts& costs, bool move);
double move_network_grams(const Job& job, const ElasticCosts& costs, double from_gco2_per_kwh, double to_gco2_per_kwh);

enum class Policy { kRunNowHome, kTemporal, kSpatial, kSpatioTemporal };
const char* policy_name(Policy p);   // "fifo", "temporal", "spatial", "spatio-temporal"

struct PlacementOptions {
  Policy policy = Policy::kSpatioTemporal;
  int max_windows = 6;                 // interruptible jobs: at most this many run windows
  // Never plan further than this after now -- except a job that cannot run
  // within it: its plan may be as long as its run (at its narrowest width,
  // plus max_windows resume overheads), so it starts at once or waits for a
  // later pass. Beyond the forecast, the forecast's last 24 h repeat.
  Hours max_lookahead{8 * 24};
  // A later plan must be cheaper by more than this fraction to beat an
  // earlier one (0 = strictly cheapest). Capacity left idle now is lost,
  // capacity later can still serve jobs that arrive later.
  double prefer_earlier_within = 0.05;
  // Capacity pricing (opportunity cost of capacity; off when empty). Entry
  // h (0..167, hours from Monday 00:00 UTC) is the expected fraction of all
  // usable regions' capacity busy in such an hour (e.g. what past weeks
  // saw). For each slot, that load (or what is already planned, if more) is
  // filled cleanest region first; the forecast intensity of the region where
  // it ends is the slot's marginal intensity theta. Candidates are *ranked*
  // by intensity + capacity_price_weight * E[max(0, theta - intensity)]:
  // clean capacity in hours that will be busy is worth what the job that
  // loses it would emit elsewhere. The expectation is over the load's
  // uncertainty: theta is taken at the expected load x (1 + s x {-1, -1/2,
  // 0, 1/2, 1}), s = capacity_price_load_spread, and the five prices
  // averaged (s = 0: the expected load alone), so a region just below the
  // marginal one is priced by how likely it is to be needed, not all or
  // nothing. Grams reported are always the plain forecast ones.
  std::vector<double> expected_load_by_hour_of_week;
  double capacity_price_weight = 0.9;
  double capacity_price_load_spread = 0.2;   // [0, 1]
  // Elastic and migratable jobs (Job::elastic()): their costs of change.
  // kSpatioTemporal only; the other policies place them at their gpus.
  ElasticCosts elastic;
};

struct Decision {
  std::string job_id;
  bool feasible = false;
  std::string reason;                // why infeasible (names each region's obstacle)
  std::string region;
  Time start{}, end{};               // first start, last end
  std::vector<Window> windows;       // one for a non-interruptible job
  bool deadline_met = false;
  double expected_grams = 0;         // operational + embodied, from the forecast
  double expected_operational_grams = 0;
  double expected_embodied_grams = 0;
  // Counterfactual: run now in the home region, ignoring capacity, with the
  // same forecast. NaN when the home region is not among `regions`.
  double run_now_home_grams = 0;
  double saving_grams = 0;           // run_now_home - expected
  double saving_pct = 0;             // 100 * saving / run_now_home
  bool forecast_extended = false;    // the plan relied on the 24 h repetition
  std::vector<PlanChange> changes;   // elastic and migratable jobs: one per change between windows
  std::string explanation;           // one human-readable paragraph
};

Decision place(const Job& job, const std::vector<Region>& regions, const CapacityLedger& planned, Time now,
               const PlacementOptions& options = {});

// One scheduling pass: places `jobs` in earliest-deadline-first order (ties:
// more GPU-hours first, then Job::seq, then id) and commits every feasible decision into
// `planned`. Returns decisions in the order of `jobs`. Prefix sums of each
// region's forecast are built once per pass.
std::vector<Decision> place_all(const std::vector<Job>& jobs, const std::vector<Region>& regions,
                                CapacityLedger& planned, Time now, const PlacementOptions& options = {});

// Re-planning: held[i] (null: none) is job i's current plan, still
// reserved in `planned`. It is released just before job i is placed, so it
// is free to job i and to no job placed before it; when job i gets no new
// plan, the held one is reserved again (it always fits: nothing was placed
// in between), returned as job i's decision, and (*kept)[i] set. So a pass
// never takes a planned job's capacity from under it. held: empty or one
// per job.
std::vector<Decision> place_all(const std::vector<Job>& jobs, const std::vector<Region>& regions,
                                CapacityLedger& planned, Time now, const PlacementOptions& options,
                                const std::vector<const Decision*>& held, std::vector<bool>* kept);

}  // namespace carbon
