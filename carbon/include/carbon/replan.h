// Incremental re-planning: which held plans a re-plan must place again.
//
// A held plan is a job's plan made by an earlier scheduling pass, still
// reserved in the ledger, whose first window has not begun ("placed, not
// started"). A full re-plan releases every held plan and places them all
// again in one schedule_pass (scheduling_pass.h). An incremental re-plan
// passes to placement only the held plans whose inputs changed since the
// pass that made them; every other held plan stays reserved, untouched, and
// is not passed to placement. The simulator (simulator.h) and the
// controller's scheduler both decide with select_replans() and in_the_way():
// there is no other selection.
//
// Inputs of a plan: the PlanBasis of the pass that made it (or last kept it):
// each region's forecast, and each region's free capacity (capacity minus
// everything reserved, after that pass) per UTC hour of its look-ahead.
//
// Terms used by the rules:
//   the job's regions  its home region under kRunNowHome and kTemporal, else
//                      Job::allowed_regions (none listed: every region);
//                      only regions of this pass count;
//   the job's span     the UTC hours from floor_hour(e), e = max(now,
//                      submit), to ceil_hour(min(now + max_lookahead,
//                      max(deadline, the plan's end, e + duration))): where
//                      a plan for it can lie now, also a fallback plan.
//
// select_replans(): one reason per held plan, the first that applies, in
// this order:
//   kFull             ReplanOptions::incremental is false: every held plan;
//   kNoBasis          the plan has no basis (the caller lost it, e.g. a
//                     controller restart: its first re-plan is a full one);
//   kCapacityLost     capacity lost where the plan runs: a region one of
//                     its windows reserves is not among this pass's
//                     regions; or in an hour one of its windows reserves,
//                     its region is over-committed (capacity shrank, a gang
//                     runs past its window: the plan no longer fits), or --
//                     with capacity pricing on (expected_load_by_hour_of_week
//                     set, policy kTemporal or kSpatioTemporal) -- has less
//                     free capacity than in the basis (jobs placed since:
//                     the price of those hours rose);
//   kForecastRevised  a revision r = (new - old) / max(old, 1 gCO2/kWh),
//                     at an instant that both the basis's forecast (within
//                     its look-ahead) and this pass's forecast cover, beyond
//                     ReplanOptions::forecast_threshold t that could change
//                     the decision: r < -t in one of the job's regions
//                     anywhere in its span (a cleaner option may exist), or
//                     r > t in an hour and region the plan reserves (the
//                     plan got dirtier); or one of the job's regions has a
//                     forecast now but was not in the basis (it became
//                     usable). A revision up where the plan does not run, or
//                     down where it runs, only makes the plan better than
//                     its alternatives: it stays;
//   kCapacityFreed    in one of the job's regions, in an hour of its span
//                     that the basis covers, free capacity (capacity - usage
//                     in `planned`) is now greater than in the basis (a job
//                     ended early, was cancelled or moved away; capacity
//                     grew);
//   kUnchanged        none of these: the plan stays as it is.
// in_the_way() adds kHigherPriority (see there).
//
// Not compared -- a full re-plan may decide differently on these, and
// ReplanOptions::incremental = false forces one: the learned expected load
// of capacity pricing (PlacementOptions::expected_load_by_hour_of_week);
// hours that entered the look-ahead since the basis; forecast hours beyond
// either forecast's end (placement repeats the last 24 h there); less free
// capacity where the plan does not run (its options only shrank); capacity
// freed by the jobs this same re-plan moves (the next re-plan sees it as
// kCapacityFreed for the jobs that could use it). So where nothing changed
// -- the held plans made by one pass on these very inputs -- a full re-plan
// makes the same decisions as the incremental one, which places nothing
// (tests/carbon/replan_test.cpp checks it).
//
// Pure: no clock, no I/O.
#pragma once

#include "carbon/capacity.h"
#include "carbon/intensity.h"
#include "carbon/job.h"
#include "carbon/placement.h"

#include <map>
#include <string>
#include <vector>

namespace carbon {

struct ReplanOptions {
  // false: every held plan is placed again (a full re-plan).
  bool incremental = true;
  // Relative forecast revision beyond which a plan is placed again (0.05 =
  // 5 %; 0: any revision). Must be >= 0 and finite (select_replans throws).
  double forecast_threshold = 0.05;
};

enum class ReplanReason {
  kUnchanged,
  kFull,
  kNoBasis,
  kCapacityLost,
  kForecastRevised,
  kCapacityFreed,
  kHigherPriority,
};
// "unchanged", "full", "no-basis", "capacity-lost", "forecast-revised",
// "capacity-freed", "higher-priority".
const char* replan_reason_name(ReplanReason r);

// What one pass planned against. Shared by every plan the pass made or kept.
struct PlanBasis {
  struct RegionBasis {
    IntensitySeries forecast;
    Time first_hour{};          // free[i]: the hour first_hour + i
    std::vector<int> free;      // capacity - usage (may be < 0: over-committed)
  };
  std::map<std::string, RegionBasis> regions;
};

// The basis of a pass just made at `now` over `regions` (their forecasts),
// with `planned` holding everything it reserved: each region's free
// capacity for the hours [floor_hour(now), ceil_hour(now +
// placement.max_lookahead)). Region::capacity_by_hour counts from
// floor_hour(now), as in placement.
PlanBasis plan_basis(const std::vector<Region>& regions, const CapacityLedger& planned, Time now,
                     const PlacementOptions& placement);

struct HeldPlan {
  const Job* job = nullptr;
  const Decision* plan = nullptr;     // feasible; its windows are reserved in `planned`
  const PlanBasis* basis = nullptr;   // null: unknown (kNoBasis)
  int priority = 0;                   // in_the_way() only
};

// One reason per held plan (see the rules above). `regions`: this pass's
// regions with their fresh forecasts; `planned`: the ledger with every held
// plan still reserved (none released yet). Throws CarbonError on an invalid
// forecast_threshold or a held plan without job or plan.
std::vector<ReplanReason> select_replans(const std::vector<HeldPlan>& held, const std::vector<Region>& regions,
                                         const CapacityLedger& planned, Time now, const PlacementOptions& placement,
                                         const ReplanOptions& options);

// Higher-priority arrivals. An unserved job is a pending job of `priority`
// that this cycle's pass left unplaced (PassOutcome::kUnplaced) or placed
// only by its fallback policy (kFallback): it needed capacity it did not
// get. A held plan is in its way (true) when its priority is lower and one
// of its windows reserves, in one of the unserved job's regions, an hour of
// the unserved job's span (taken without a plan). The caller re-runs that
// priority's pass with those plans released and places them again after it
// (kHigherPriority). Pure; one entry per held plan.
struct Unserved {
  const Job* job = nullptr;
  int priority = 0;
};
std::vector<bool> in_the_way(const std::vector<Unserved>& unserved, const std::vector<HeldPlan>& held,
                             const std::vector<Region>& regions, Time now, const PlacementOptions& placement);

}  // namespace carbon
