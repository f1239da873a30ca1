// One scheduling cycle's placement of the jobs that wait for a plan: the one
// path shared by the simulator (simulator.h) and the controller's scheduler.
//
// schedule_pass(jobs, previous, regions, planned, now, options, fallback):
//   1. place_all(jobs) with `options` (earliest deadline first, each feasible
//      decision committed into `planned`);
//   2. a job that got no plan but had one before (previous[i], when
//      re-planning: its reservation was released by the caller) keeps that
//      plan when it still fits: every reserved hour of its region has room in
//      `planned` (Region::capacity); the plan is reserved again;
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
