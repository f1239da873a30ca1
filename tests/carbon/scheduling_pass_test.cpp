// schedule_pass: one cycle's placement, kept plans and fallback.
#include "carbon/error.h"
#include "carbon/scheduling_pass.h"

#include <gtest/gtest.h>

namespace carbon {
namespace {

const Time kNow = parse_time("2023-06-05T00:00Z");

// One region: `capacity` GPUs, 1 kW each, intensity `base` but `clean` in hours [a, b).
Region region(const std::string& name, int capacity, double base, int a = 0, int b = 0, double clean = 0) {
  std::vector<double> v(48, base);
  for (int h = a; h < b; ++h) v[size_t(h)] = clean;
  Region r;
  r.name = name;
  r.capacity = capacity;
  r.pue = 1.0;
  r.hardware = HardwareProfile{"plain", "GPU", 8, 1000, 0, 0, 0, 1};
  r.forecast = IntensitySeries(name, kNow, Hours{1}, v);
  return r;
}

Job job(const std::string& id, int gpus, int hours, int slack_h, const std::string& home = "A") {
  Job j;
  j.id = id;
  j.gpus = gpus;
  j.duration = Hours{hours};
  j.submit = kNow;
  j.deadline = kNow + Hours{hours + slack_h};
  j.home_region = home;
  return j;
}

// A plan made earlier: region A, hours [from, to) after kNow.
Decision plan_in_a(int from, int to) {
  Decision d;
  d.feasible = true;
  d.region = "A";
  d.windows = {{kNow + Hours{from}, kNow + Hours{to}}};
  d.start = d.windows[0].start;
  d.end = d.windows[0].end;
  d.deadline_met = true;
  return d;
}

TEST(SchedulingPass, TwoJobsWantingTheSameCleanHourNeverShareItsCapacity) {
  std::vector<Region> rs{region("A", 8, 500, 3, 4, 50)};
  CapacityLedger ledger;
  auto out = schedule_pass({job("a", 8, 1, 6), job("b", 8, 1, 6)}, {}, rs, ledger, kNow, {}, fallback_policy(Policy::kSpatioTemporal));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].outcome, PassOutcome::kPlaced);
  ASSERT_EQ(out[1].outcome, PassOutcome::kPlaced);
  EXPECT_NE(out[0].decision.start, out[1].decision.start);
  for (int h = 0; h < 8; ++h) EXPECT_LE(ledger.used("A", kNow + Hours{h}), 8) << "hour " << h;
}

TEST(SchedulingPass, AJobWhoseDeadlineCannotBeMetFallsBackToTheEarliestRun) {
  std::vector<Region> rs{region("A", 8, 100)};
  CapacityLedger ledger;
  ledger.reserve("A", kNow, kNow + Hours{4}, 8);   // full for 4 h
  auto out = schedule_pass({job("late", 8, 2, 1)}, {}, rs, ledger, kNow, {}, Policy::kSpatial);
  ASSERT_EQ(out[0].outcome, PassOutcome::kFallback);
  EXPECT_EQ(out[0].decision.start, kNow + Hours{4});
  EXPECT_FALSE(out[0].decision.deadline_met);
}

TEST(SchedulingPass, WithoutAFallbackPolicyAJobThatCannotBePlacedWaits) {
  std::vector<Region> rs{region("A", 8, 100)};
  CapacityLedger ledger;
  ledger.reserve("A", kNow, kNow + Hours{4}, 8);
  PlacementOptions fifo;
  fifo.policy = Policy::kRunNowHome;
  fifo.max_lookahead = Hours{3};
  auto out = schedule_pass({job("w", 8, 2, 1)}, {}, rs, ledger, kNow, fifo, Policy::kRunNowHome);
  EXPECT_EQ(out[0].outcome, PassOutcome::kUnplaced);
  EXPECT_FALSE(out[0].decision.reason.empty());
}

TEST(SchedulingPass, AReplannedJobThatNoLongerFitsAnewKeepsItsOldPlan) {
  // The old plan (hours 4-5) still fits; nothing else does within the deadline.
  std::vector<Region> rs{region("A", 8, 100)};
  CapacityLedger ledger;
  ledger.reserve("A", kNow, kNow + Hours{4}, 8);
  ledger.reserve("A", kNow + Hours{5}, kNow + Hours{48}, 8);
  Job j = job("r", 8, 1, 0);   // deadline: now + 1 h, unmeetable anew
  auto out = schedule_pass({j}, {plan_in_a(4, 5)}, rs, ledger, kNow, {}, Policy::kSpatioTemporal);
  ASSERT_EQ(out[0].outcome, PassOutcome::kKeptPrevious);
  EXPECT_EQ(out[0].decision.start, kNow + Hours{4});
  EXPECT_EQ(ledger.used("A", kNow + Hours{4}), 16 - 8);   // reserved again (was free)
}

TEST(SchedulingPass, AReplanNeverGivesAnEarlierDeadlinesJobTheHoursAnotherJobIsPlannedIn) {
  // Hours 2-3 are clean. A (deadline +4 h) is planned in hours 1-2, B
  // (deadline +5 h) in hours 3-4; hour 0 is taken by a running job. Placed
  // anew with both plans released, A would take hours 2-3 and leave B no two
  // free hours before its deadline. Held, B's hours are not A's to take.
  std::vector<Region> rs{region("A", 8, 500, 2, 4, 100)};
  CapacityLedger ledger;
  ledger.reserve("A", kNow, kNow + Hours{1}, 8);
  auto out = schedule_pass({job("a", 8, 2, 2), job("b", 8, 2, 3)}, {plan_in_a(1, 3), plan_in_a(3, 5)}, rs, ledger, kNow, {},
                           Policy::kSpatial);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NE(out[i].outcome, PassOutcome::kFallback) << i;
    EXPECT_TRUE(out[i].decision.deadline_met) << i;
  }
  EXPECT_EQ(out[0].decision.start, kNow + Hours{1});
  EXPECT_EQ(out[1].decision.start, kNow + Hours{3});
  for (int h = 0; h < 8; ++h) EXPECT_LE(ledger.used("A", kNow + Hours{h}), 8) << "hour " << h;
}

TEST(SchedulingPass, AHeldPlanThatNoLongerFitsIsPlacedAnew) {
  // Capacity was taken from under the old plan (hours 1-2) before the pass:
  // it is not held (that would over-commit); the job is placed anew.
  std::vector<Region> rs{region("A", 8, 100)};
  CapacityLedger ledger;
  ledger.reserve("A", kNow + Hours{1}, kNow + Hours{2}, 8);
  auto out = schedule_pass({job("r", 8, 2, 6)}, {plan_in_a(1, 3)}, rs, ledger, kNow, {}, Policy::kSpatial);
  ASSERT_EQ(out[0].outcome, PassOutcome::kPlaced);
  EXPECT_GE(out[0].decision.start, kNow + Hours{2});
  for (int h = 0; h < 10; ++h) EXPECT_LE(ledger.used("A", kNow + Hours{h}), 8) << "hour " << h;
}

TEST(SchedulingPass, PreviousPlansMustBeOnePerJob) {
  std::vector<Region> rs{region("A", 8, 100)};
  CapacityLedger ledger;
  EXPECT_THROW(schedule_pass({job("a", 1, 1, 1), job("b", 1, 1, 1)}, {std::nullopt}, rs, ledger, kNow, {},
                             Policy::kSpatial),
               CarbonError);
}

TEST(SchedulingPass, TheFallbackOfTemporalIsTheHomeRegionAndOfEveryOtherPolicyAnyRegion) {
  EXPECT_EQ(fallback_policy(Policy::kTemporal), Policy::kRunNowHome);
  EXPECT_EQ(fallback_policy(Policy::kSpatioTemporal), Policy::kSpatial);
  EXPECT_EQ(fallback_policy(Policy::kSpatial), Policy::kSpatial);
  EXPECT_EQ(fallback_policy(Policy::kRunNowHome), Policy::kSpatial);
}

}  // namespace
}  // namespace carbon
