// Incremental re-planning (replan.h): which held plans a re-plan places
// again, and that where nothing changed the decisions are a full re-plan's.
// Tables keyed by a sentence.
#include "carbon/error.h"
#include "carbon/replan.h"
#include "carbon/scheduling_pass.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <optional>
#include <set>

namespace carbon {
namespace {

const Time kNow = parse_time("2023-06-05T00:00Z");

// A region of 8 GPUs (1 kW each, no embodied grams), intensity 500 but 100
// in the clean hours [a, b).
Region region(const std::string& name, int a, int b) {
  std::vector<double> v(48, 500);
  for (int h = a; h < b; ++h) v[size_t(h)] = 100;
  Region r;
  r.name = name;
  r.capacity = 8;
  r.pue = 1.0;
  r.hardware = HardwareProfile{"plain", "GPU", 8, 1000, 0, 0, 0, 1};
  r.forecast = IntensitySeries(name, kNow, Hours{1}, v);
  return r;
}

Job job(const std::string& id, int hours, int deadline_h, std::vector<std::string> allowed, int64_t seq) {
  Job j;
  j.id = id;
  j.gpus = 8;
  j.duration = Hours{hours};
  j.submit = kNow;
  j.deadline = kNow + Hours{deadline_h};
  j.home_region = allowed.empty() ? "A" : allowed.front();
  j.allowed_regions = std::move(allowed);
  j.seq = seq;
  return j;
}

// Three regions, each clean for 4 h (A 4-8, B 10-14, C 20-24) and one job
// at a time wide; a job ran in A in hours 0-3 when the jobs were planned.
// Six jobs of 8 GPUs for 2 h, two per clean window:
//   a1, a2  A only, deadline +12 h   -> A 4-6, A 6-8
//   ab, b1  A or B, B only, +20 h    -> B 10-12, B 12-14 (A is full)
//   c1, any C only, every region, +30 h -> C 20-22, C 22-24
// Spans (replan.h): a* hours 0-12, ab/b1 0-20, c1/any 0-30.
struct World {
  std::vector<Region> regions{region("A", 4, 8), region("B", 10, 14), region("C", 20, 24)};
  std::vector<Job> jobs{job("a1", 2, 12, {"A"}, 1),      job("a2", 2, 12, {"A"}, 2), job("ab", 2, 20, {"A", "B"}, 3),
                        job("b1", 2, 20, {"B"}, 4),      job("c1", 2, 30, {"C"}, 5), job("any", 2, 30, {}, 6)};
  CapacityLedger ledger;
  PlacementOptions options;
  std::vector<Decision> plans;
  PlanBasis basis;

  World() {
    ledger.reserve("A", kNow, kNow + Hours{3}, 8);   // the running job
    auto out = schedule_pass(jobs, {}, regions, ledger, kNow, options, fallback_policy(options.policy));
    for (auto& r : out) plans.push_back(r.decision);
    basis = plan_basis(regions, ledger, kNow, options);
  }
  std::vector<HeldPlan> held(int priority = 0) const {
    std::vector<HeldPlan> h;
    for (size_t i = 0; i < jobs.size(); ++i) h.push_back({&jobs[i], &plans[i], &basis, priority});
    return h;
  }
  size_t index(const std::string& id) const {
    for (size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i].id == id) return i;
    throw std::runtime_error("no job " + id);
  }
};

void scale_forecast(Region& r, int from_h, int to_h, double factor) {
  std::vector<double> v = r.forecast.values();
  for (int h = from_h; h < to_h; ++h) v[size_t(h)] *= factor;
  r.forecast = IntensitySeries(r.name, r.forecast.start(), r.forecast.step(), v);
}

std::set<std::string> selected(const World& w, const std::vector<ReplanReason>& why) {
  std::set<std::string> s;
  for (size_t i = 0; i < why.size(); ++i)
    if (why[i] != ReplanReason::kUnchanged) s.insert(w.jobs[i].id);
  return s;
}

// The re-plan an engine runs: the selected plans released and placed again
// (held until their turn), every other plan untouched. Decisions in job order.
std::vector<Decision> incremental(World& w, const std::vector<ReplanReason>& why) {
  std::vector<Job> jobs;
  std::vector<std::optional<Decision>> previous;
  std::vector<size_t> idx;
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    if (why[i] == ReplanReason::kUnchanged) continue;
    w.ledger.reserve(w.plans[i].region, w.plans[i].windows, -w.jobs[i].gpus);
    jobs.push_back(w.jobs[i]);
    previous.push_back(w.plans[i]);
    idx.push_back(i);
  }
  std::vector<Decision> out = w.plans;
  if (jobs.empty()) return out;
  auto r = schedule_pass(jobs, previous, w.regions, w.ledger, kNow, w.options, fallback_policy(w.options.policy));
  for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = r[k].decision;
  return out;
}

// Every held plan released and placed again.
std::vector<Decision> full(World w) {
  return incremental(w, std::vector<ReplanReason>(w.jobs.size(), ReplanReason::kFull));
}

void expect_same(const std::vector<Decision>& a, const std::vector<Decision>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].feasible, b[i].feasible) << a[i].job_id;
    EXPECT_EQ(a[i].region, b[i].region) << a[i].job_id;
    ASSERT_EQ(a[i].windows.size(), b[i].windows.size()) << a[i].job_id;
    for (size_t k = 0; k < a[i].windows.size(); ++k) {
      EXPECT_EQ(a[i].windows[k].start, b[i].windows[k].start) << a[i].job_id;
      EXPECT_EQ(a[i].windows[k].end, b[i].windows[k].end) << a[i].job_id;
    }
  }
}

TEST(Replan, TheScenarioPlansEachJobInItsCleanWindow) {
  World w;
  const std::vector<std::pair<std::string, int>> want{{"A", 4}, {"A", 6}, {"B", 10}, {"B", 12}, {"C", 20}, {"C", 22}};
  for (size_t i = 0; i < w.jobs.size(); ++i) {
    SCOPED_TRACE(w.jobs[i].id);
    ASSERT_TRUE(w.plans[i].feasible);
    EXPECT_EQ(w.plans[i].region, want[i].first);
    EXPECT_EQ(w.plans[i].start, kNow + Hours{want[i].second});
  }
}

struct Case {
  const char* name;
  std::function<void(World&)> change;   // applied after the plans were made
  std::set<std::string> replaced;       // the held plans select_replans passes to placement
  bool equals_full = false;             // every decision equals the full re-plan's
  ReplanOptions options{};
};

TEST(Replan, EachKindOfChangeReplacesExactlyTheAffectedJobs) {
  const std::set<std::string> all{"a1", "a2", "ab", "b1", "c1", "any"};
  ReplanOptions off;
  off.incremental = false;
  ReplanOptions zero;
  zero.forecast_threshold = 0;
  const std::vector<Case> cases{
      {"nothing changed re-places nothing and every decision equals the full re-plan's", [](World&) {}, {}, true},
      {"a forecast revised by 1 % re-places nothing and every decision equals the full re-plan's",
       [](World& w) {
         for (auto& r : w.regions) scale_forecast(r, 0, 48, 1.01);
       },
       {},
       true},
      {"a forecast revised by 4 % in B, under the 5 % threshold, re-places nothing",
       [](World& w) { scale_forecast(w.regions[1], 10, 18, 0.96); }, {}, true},
      {"a forecast revised down by 10 % in B in hours 15-17 re-places the jobs that may use B and whose span "
       "reaches them",
       [](World& w) { scale_forecast(w.regions[1], 15, 18, 0.90); }, {"ab", "b1", "any"}},
      {"a forecast revised up by 10 % in B in hours 15-17, which no plan reserves, re-places nothing",
       [](World& w) { scale_forecast(w.regions[1], 15, 18, 1.10); }, {}},
      {"a forecast revised up by 10 % in B in hour 10 re-places only ab, whose plan reserves it",
       [](World& w) { scale_forecast(w.regions[1], 10, 11, 1.10); }, {"ab"}},
      {"a forecast revised down by 10 % in C in hours 25-27 re-places only the jobs that may use C",
       [](World& w) { scale_forecast(w.regions[2], 25, 28, 0.90); }, {"c1", "any"}},
      {"a forecast revised in A after hour 40, beyond every job's span, re-places nothing",
       [](World& w) { scale_forecast(w.regions[0], 40, 48, 2.0); }, {}},
      {"with a threshold of 0 any downward revision in B re-places the jobs that may use B",
       [](World& w) { scale_forecast(w.regions[1], 15, 18, 0.99); }, {"ab", "b1", "any"}, false, zero},
      {"capacity freed in A in hours 0-2 (the running job ended) re-places the jobs that may use A",
       [](World& w) { w.ledger.reserve("A", kNow, kNow + Hours{3}, -8); }, {"a1", "a2", "ab", "any"}},
      {"capacity grown in C in hours 25-26 re-places only the jobs that may use C",
       [](World& w) {
         w.regions[2].capacity_by_hour.assign(27, 8);
         w.regions[2].capacity_by_hour[25] = w.regions[2].capacity_by_hour[26] = 16;
       },
       {"c1", "any"}},
      {"capacity lost in A in hours 4-5 re-places only a1, whose plan reserves them",
       [](World& w) { w.regions[0].capacity_by_hour = {8, 8, 8, 8, 0, 0}; }, {"a1"}},
      {"with capacity pricing, capacity taken in C at 20:00 since the plan re-places only c1, whose plan runs then",
       [](World& w) {
         w.options.expected_load_by_hour_of_week.assign(168, 0.5);
         w.basis.regions.at("C").free[20] += 4;
       },
       {"c1"}},
      {"without capacity pricing, capacity taken in C at 20:00 where c1 still fits re-places nothing",
       [](World& w) { w.basis.regions.at("C").free[20] += 4; }, {}},
      {"capacity taken in A at 03:00, where no plan runs, re-places nothing",
       [](World& w) {
         w.options.expected_load_by_hour_of_week.assign(168, 0.5);
         w.ledger.reserve("A", kNow + Hours{3}, kNow + Hours{4}, 4);
       },
       {}},
      {"capacity lost in A in hours 9-11, which no plan reserves, re-places nothing",
       [](World& w) { w.regions[0].capacity_by_hour = {8, 8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0}; }, {}},
      {"a region that left the pass re-places the plans that reserve it",
       [](World& w) { w.regions.pop_back(); }, {"c1", "any"}},
      {"a region that joined the pass re-places the jobs that may use it",
       [](World& w) { w.regions.push_back(region("D", 30, 34)); }, {"any"}},
      {"full re-plans (incremental off) re-place every job", [](World&) {}, all, true, off},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    c.change(w);
    const auto why = select_replans(w.held(), w.regions, w.ledger, kNow, w.options, c.options);
    EXPECT_EQ(selected(w, why), c.replaced);
    const auto expected_full = full(w);
    World before = w;
    const auto got = incremental(w, why);
    // Plans not selected keep their reservations: the ledger still holds them.
    for (size_t i = 0; i < w.jobs.size(); ++i) {
      if (c.replaced.count(w.jobs[i].id)) continue;
      for (const auto& win : w.plans[i].windows)
        EXPECT_EQ(w.ledger.used(w.plans[i].region, win.start), before.ledger.used(w.plans[i].region, win.start))
            << w.jobs[i].id;
    }
    if (c.equals_full) expect_same(got, expected_full);
  }
}

TEST(Replan, EveryChangeHasItsReason) {
  struct ReasonCase {
    const char* name;
    std::function<void(World&)> change;
    std::string job;
    ReplanReason reason;
  };
  const std::vector<ReasonCase> cases{
      {"an unchanged plan is kUnchanged", [](World&) {}, "a1", ReplanReason::kUnchanged},
      {"a revised forecast is kForecastRevised", [](World& w) { scale_forecast(w.regions[0], 0, 12, 0.5); }, "a1",
       ReplanReason::kForecastRevised},
      {"freed capacity is kCapacityFreed", [](World& w) { w.ledger.reserve("A", kNow, kNow + Hours{3}, -8); }, "a1",
       ReplanReason::kCapacityFreed},
      {"an over-committed reserved hour is kCapacityLost, before a revision",
       [](World& w) {
         w.regions[0].capacity_by_hour = {8, 8, 8, 8, 0};
         scale_forecast(w.regions[0], 0, 12, 0.5);
       },
       "a1", ReplanReason::kCapacityLost},
      {"a revision comes before freed capacity",
       [](World& w) {
         w.ledger.reserve("A", kNow, kNow + Hours{3}, -8);
         scale_forecast(w.regions[0], 0, 12, 0.5);
       },
       "a1", ReplanReason::kForecastRevised},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    c.change(w);
    const auto why = select_replans(w.held(), w.regions, w.ledger, kNow, w.options, {});
    EXPECT_STREQ(replan_reason_name(why[w.index(c.job)]), replan_reason_name(c.reason));
  }
  World w;
  auto held = w.held();
  held[0].basis = nullptr;
  EXPECT_EQ(select_replans(held, w.regions, w.ledger, kNow, w.options, {})[0], ReplanReason::kNoBasis);
}

TEST(Replan, AnHourLaterOnlyTheRemainingSpanCounts) {
  World w;
  scale_forecast(w.regions[0], 0, 10, 0.5);
  const Time later = kNow + Hours{3};
  // Re-planned 3 h later: hours 0-2 are past; A's revision in 3-9 still
  // touches every job that may use A.
  auto why = select_replans(w.held(), w.regions, w.ledger, later, w.options, {});
  EXPECT_EQ(selected(w, why), (std::set<std::string>{"a1", "a2", "ab", "any"}));
  World v;
  scale_forecast(v.regions[0], 0, 3, 0.5);
  why = select_replans(v.held(), v.regions, v.ledger, later, v.options, {});
  EXPECT_EQ(selected(v, why), std::set<std::string>{});
}

TEST(Replan, TemporalJobsOnlyLookAtTheirHomeRegion) {
  World w;
  w.options.policy = Policy::kTemporal;
  scale_forecast(w.regions[1], 15, 18, 0.5);   // B: home of b1 only
  const auto why = select_replans(w.held(), w.regions, w.ledger, kNow, w.options, {});
  EXPECT_EQ(selected(w, why), std::set<std::string>{"b1"});
}

TEST(Replan, ABadThresholdIsRefused) {
  World w;
  ReplanOptions bad;
  bad.forecast_threshold = -0.01;
  EXPECT_THROW(select_replans(w.held(), w.regions, w.ledger, kNow, w.options, bad), CarbonError);
  bad.forecast_threshold = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(select_replans(w.held(), w.regions, w.ledger, kNow, w.options, bad), CarbonError);
}

TEST(Replan, AHigherPriorityArrivalLeftUnplacedReplacesTheLowerPlansInItsWay) {
  // "urgent" needs A for 6 h before +8 h; A is free only in hours 3-4
  // (held: a1 4-6, a2 6-8), so the pass leaves it to the fallback.
  World w;
  w.ledger.reserve("A", kNow, kNow + Hours{3}, -8);   // the running job ended: A free 0-4
  Job urgent = job("urgent", 6, 8, {"A"}, 7);
  CapacityLedger trial = w.ledger;
  auto r = schedule_pass({urgent}, {}, w.regions, trial, kNow, w.options, fallback_policy(w.options.policy));
  ASSERT_EQ(r[0].outcome, PassOutcome::kFallback);

  struct ArrivalCase {
    const char* name;
    int held_priority, arrival_priority;
    std::vector<std::string> arrival_regions;
    std::set<std::string> in_way;
  };
  const std::vector<ArrivalCase> cases{
      {"a higher-priority arrival in A re-places the lower-priority plans in A within its span", 0, 5, {"A"},
       {"a1", "a2"}},
      {"an arrival of equal priority re-places nothing", 5, 5, {"A"}, {}},
      {"an arrival of lower priority re-places nothing", 5, 0, {"A"}, {}},
      {"a higher-priority arrival in B re-places the plans in B, not those in A", 0, 5, {"B"}, {"ab", "b1"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Job u = job("urgent", 6, 14, c.arrival_regions, 7);
    const auto way = in_the_way({{&u, c.arrival_priority}}, w.held(c.held_priority), w.regions, kNow, w.options);
    std::set<std::string> got;
    for (size_t i = 0; i < way.size(); ++i)
      if (way[i]) got.insert(w.jobs[i].id);
    EXPECT_EQ(got, c.in_way);
  }
  // Released, they make room: the arrival meets its deadline in A.
  const auto way = in_the_way({{&urgent, 5}}, w.held(0), w.regions, kNow, w.options);
  for (size_t i = 0; i < way.size(); ++i)
    if (way[i]) w.ledger.reserve(w.plans[i].region, w.plans[i].windows, -8);
  r = schedule_pass({urgent}, {}, w.regions, w.ledger, kNow, w.options, fallback_policy(w.options.policy));
  EXPECT_EQ(r[0].outcome, PassOutcome::kPlaced);
  EXPECT_TRUE(r[0].decision.deadline_met);
  EXPECT_TRUE(in_the_way({}, w.held(0), w.regions, kNow, w.options) == std::vector<bool>(w.jobs.size(), false));
}

TEST(Replan, TheBasisHoldsEachRegionsForecastAndFreeCapacity) {
  World w;
  ASSERT_EQ(w.basis.regions.size(), 3u);
  const auto& a = w.basis.regions.at("A");
  EXPECT_EQ(a.first_hour, kNow);
  ASSERT_EQ(a.free.size(), size_t(w.options.max_lookahead.count()));
  EXPECT_EQ(a.free[0], 0);   // the running job
  EXPECT_EQ(a.free[3], 8);
  EXPECT_EQ(a.free[4], 0);   // a1
  EXPECT_EQ(a.forecast.values(), w.regions[0].forecast.values());
}

}  // namespace
}  // namespace carbon
