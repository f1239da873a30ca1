// One scheduling cycle's placement of the jobs that wait for a plan: the one
// path shared by the simulator (simulator.h) and the controller's scheduler.
//
// schedule_pass(jobs, previous, regions, planned, now, options, fallback):
//   1. previous plans (previous[i], when re-planning: the caller released
//      their reservations) are reserved again, each while it still fits
//      (every reserved hour of its region has room in `planned`,
//      Region::capacity);
//   2. place_all(jobs) with `options` and those plans held (earliest
//      deadline first, each feasible decision committed into `planned`; a
//      held plan is released only to its own job, so no job placed before
//      it can take its capacity): a job with a new plan takes it
//      (kPlaced), a job with none keeps its held plan (kKeptPrevious). A
//      re-plan never makes a job lose the plan it had;
//   3. every other job without a plan is placed with policy `fallback`
//      (deadline ignored when choosing: the earliest possible run), when
//      fallback differs from options.policy;
//   4. what is left is kUnplaced (no capacity in the look-ahead): the caller
//      keeps it waiting and tries again next cycle.
// Results come in the order of `jobs`. Pure: no clock, no I/O.
#pragma once

#include "carbon/capacity.h"
#include "carbon/placement.h"

#include <optional>
#include <vector>

namespace carbon {

enum class PassOutcome { kPlaced, kKeptPrevious, kFallback, kUnplaced };
const char* pass_outcome_name(PassOutcome o);   // "placed", "kept", "fallback", "unplaced"

struct PassResult {
  PassOutcome outcome = PassOutcome::kUnplaced;
  Decision decision;   // feasible unless kUnplaced (then: the first pass's reason)
};

// `previous` is empty or has one entry per job (nullopt: no previous plan).
std::vector<PassResult> schedule_pass(const std::vector<Job>& jobs, const std::vector<std::optional<Decision>>& previous,
                                      const std::vector<Region>& regions, CapacityLedger& planned, Time now,
                                      const PlacementOptions& options, Policy fallback);

// The fallback of a policy: kTemporal -> kRunNowHome (home region, as early
// as possible), every other -> kSpatial (any region, as early as possible).
Policy fallback_policy(Policy p);

}  // namespace carbon
