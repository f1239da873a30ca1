// Incremental re-planning in the controller's Scheduler: a re-plan places
// again only the SCHEDULED jobs whose inputs changed (carbon/replan.h), the
// others keep their plan and reservation; a restart forgets what plans were
// made against, so its first re-plan is a full one; a higher-priority job
// left on its fallback releases the lower-priority plans in its way. Driven
// by a ManualClock with a real SQLite store and the scripted FakeExecutor.
// Tables keyed by a sentence.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>

#include <functional>
#include <memory>
#include <set>

#include "common/spawn.h"
#include "controller/config/config_files.h"
#include "controller/scheduling/scheduler.h"
#include "fake_executor.h"

using namespace controller;
using ctltest::FakeExecutor;

namespace {

constexpr int64_t kHour = carbon::kHourMs;
constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z

// Hourly forecasts per zone the test revises between cycles: 400 g, but
// `clean` hours 100 g, each times its revision factor.
class Forecasts final : public IntensitySource {
 public:
  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    std::vector<ForecastPoint> out;
    const int64_t h0 = now_ms / kHour * kHour;
    for (int h = 0; h <= horizon_h; ++h) out.push_back({h0 + h * kHour, value(zone, h0 + h * kHour)});
    return out;
  }
  double value(const std::string& zone, int64_t t) const {
    auto c = clean.find({zone, t});
    auto f = factor.find({zone, t});
    return (c == clean.end() ? 400.0 : c->second) * (f == factor.end() ? 1.0 : f->second);
  }
  // Hours [from_h, to_h) after kT0 in `zone` (every zone: "") times `by`.
  void revise(const std::string& zone, int from_h, int to_h, double by) {
    for (const std::string z : {"DE", "FR"})
      if (zone.empty() || zone == z)
        for (int h = from_h; h < to_h; ++h) factor[{z, kT0 + h * kHour}] = by;
  }
  std::map<std::pair<std::string, int64_t>, double> clean, factor;
};

const char* kRegions = "regions:\n  - {name: DE, nodes: 2, zone: DE}\n  - {name: FR, nodes: 2, zone: FR}\n";

// Store, registry and scheduler over FakeExecutor (open() again: a restart).
struct Core {
  explicit Core(SchedulerOptions so) : clock(kT0), so(so) {
    forecasts.clean[{"DE", kT0 + 5 * kHour}] = 100;
    forecasts.clean[{"FR", kT0 + 8 * kHour}] = 100;
    open();
  }
  void open() {
    sched.reset();
    registry.reset();
    store.reset();
    store = std::make_unique<Store>(dir.file("c.db"));
    registry = std::make_unique<Registry>(*store, clock);
    registry->load();
    regions = parse_regions_yaml(kRegions, "test");
    std::map<std::string, Executor*> ex;
    for (auto& r : regions) ex[r.name] = &fake;
    so.intensity = &forecasts;
    sched = std::make_unique<Scheduler>(*registry, clock, regions, ex, &metrics, so);
  }
  std::string submit(const std::string& name, nlohmann::json s) {
    s["name"] = name;
    s["worker"] = {{"data", {{"train", "t.bin"}}}};
    if (!s.contains("estimate")) s["estimate"] = {{"duration_s", 3600}};
    const std::string id = registry->submit("team-a", parse_job_spec(s), "").job.id();
    ids[name] = id;
    names[id] = name;
    return id;
  }
  Job job(const std::string& name) const { return *registry->get(ids.at(name)); }
  // The held plans the cycle placed again, by job name.
  std::set<std::string> replaced(const CycleReport& rep) const {
    std::set<std::string> out;
    for (const auto& [id, why] : rep.replan)
      if (why != carbon::ReplanReason::kUnchanged) out.insert(names.at(id));
    return out;
  }

  gstest::TempDir dir;
  ManualClock clock;
  SchedulerOptions so;
  Forecasts forecasts;
  Metrics metrics;
  FakeExecutor fake;
  std::unique_ptr<Store> store;
  std::unique_ptr<Registry> registry;
  std::vector<RegionConfig> regions;
  std::unique_ptr<Scheduler> sched;
  std::map<std::string, std::string> ids, names;
};

// At kT0: a gang runs in DE for 4 h (1 of 2 nodes), and three 1 h jobs wait
// for their clean hour: de (DE only, +10 h) and both (DE or FR, +12 h) at
// DE 05:00, fr (FR only, +12 h) at FR 08:00. Spans (carbon/replan.h): de
// until 11:00, fr and both until 13:00.
void plan_the_scenario(Core& core) {
  core.submit("run", {{"regions", {"DE"}}, {"estimate", {{"duration_s", 4 * 3600}}}});
  core.submit("de", {{"regions", {"DE"}}, {"max_delay_s", 10 * 3600}});
  core.submit("fr", {{"regions", {"FR"}}, {"max_delay_s", 12 * 3600}});
  core.submit("both", {{"regions", {"DE", "FR"}}, {"home_region", "DE"}, {"max_delay_s", 12 * 3600}});
  core.sched->cycle();
}

struct ReplanCase {
  const char* sentence;
  std::function<void(Core&)> change;   // between the plans (kT0) and the re-plan (kT0 + 1 h)
  std::set<std::string> replaced;
  bool full = false;                   // SchedulerOptions::replan.incremental off
};

TEST(SchedulerReplan, EachKindOfChangeReplacesExactlyTheAffectedJobs) {
  const std::vector<ReplanCase> cases{
      {"nothing changed re-places nothing", [](Core&) {}, {}},
      {"a forecast revised by 1 % everywhere re-places nothing", [](Core& c) { c.forecasts.revise("", 0, 48, 1.01); },
       {}},
      {"a forecast revised down by 10 % in FR re-places the jobs that may run in FR",
       [](Core& c) { c.forecasts.revise("FR", 2, 4, 0.90); }, {"fr", "both"}},
      {"a forecast revised up by 10 % in FR where no plan is re-places nothing",
       [](Core& c) { c.forecasts.revise("FR", 2, 4, 1.10); }, {}},
      {"a forecast revised up by 10 % at DE 05:00 re-places the jobs planned there",
       [](Core& c) { c.forecasts.revise("DE", 5, 6, 1.10); }, {"de", "both"}},
      {"a forecast revised in DE after 13:00, beyond every span, re-places nothing",
       [](Core& c) { c.forecasts.revise("DE", 14, 20, 0.5); }, {}},
      {"a gang that ended early frees DE: the jobs that may run in DE are re-placed",
       [](Core& c) {
         c.fake.script(c.ids.at("run"), {FakeExecutor::status(GangPhase::kSucceeded, "", {{"state", "succeeded"}})});
       },
       {"de", "both"}},
      {"a cancelled job frees its hour in DE: the other job that may run there is re-placed",
       [](Core& c) {
         c.registry->update(c.ids.at("de"), kAllTenants, [&](Job& j) {
           return j.transition(JobState::kCancelled, "Cancelled", "by the test", c.clock.now_ms());
         });
       },
       {"both"}},
      {"a full re-plan re-places every held job", [](Core&) {}, {"de", "fr", "both"}, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sentence);
    SchedulerOptions so;
    so.replan_period_ms = kHour;
    so.replan.incremental = !c.full;
    Core core(so);
    plan_the_scenario(core);
    ASSERT_EQ(core.job("run").state(), JobState::kRunning);
    for (const char* n : {"de", "fr", "both"}) ASSERT_EQ(core.job(n).state(), JobState::kScheduled) << n;
    ASSERT_EQ(core.job("de").placement->start_ms, kT0 + 5 * kHour);
    ASSERT_EQ(core.job("fr").placement->start_ms, kT0 + 8 * kHour);
    std::map<std::string, PlacementView> before;
    for (const char* n : {"de", "fr", "both"}) before[n] = *core.job(n).placement;
    c.change(core);
    core.clock.set_ms(kT0 + kHour);
    const CycleReport rep = core.sched->cycle();
    EXPECT_EQ(core.replaced(rep), c.replaced);
    if (c.full)
      for (const auto& [id, why] : rep.replan) EXPECT_EQ(why, carbon::ReplanReason::kFull) << core.names.at(id);
    // Every job left untouched keeps its plan and its reservation.
    const auto stored = core.store->load_reservations();
    for (const auto& [n, pv] : before) {
      if (c.replaced.count(n) || core.job(n).state() != JobState::kScheduled) continue;
      EXPECT_EQ(core.job(n).placement->windows, pv.windows) << n;
      bool reserved = false;
      for (const auto& r : stored) reserved = reserved || (r.job_id == core.ids.at(n) && r.start_ms == pv.start_ms);
      EXPECT_TRUE(reserved) << n;
    }
  }
}

TEST(SchedulerReplan, WhereNothingChangedTheDecisionsAreTheFullReplans) {
  // The same scenario and the same 1 % revision through an incremental and a
  // full re-plan: every job ends where the full re-plan puts it.
  std::map<std::string, PlacementView> got[2];
  for (int full = 0; full < 2; ++full) {
    SchedulerOptions so;
    so.replan_period_ms = kHour;
    so.replan.incremental = full == 0;
    Core core(so);
    plan_the_scenario(core);
    core.forecasts.revise("", 0, 48, 1.01);
    core.clock.set_ms(kT0 + kHour);
    const CycleReport rep = core.sched->cycle();
    EXPECT_EQ(core.replaced(rep).size(), full ? 3u : 0u);
    for (const char* n : {"de", "fr", "both"}) got[full][n] = *core.job(n).placement;
  }
  for (const char* n : {"de", "fr", "both"}) {
    EXPECT_EQ(got[0][n].region, got[1][n].region) << n;
    EXPECT_EQ(got[0][n].windows, got[1][n].windows) << n;
  }
}

TEST(SchedulerReplan, AJobPlacedSinceWhereAPlanRunsReplacesThatPlanOnlyWithCapacityPricing) {
  // DE (2 nodes) is clean at 05:00: `first` is planned there at 00:00,
  // `second` at 00:30 (no re-plan due). At 01:00 `first` has less free
  // capacity where it runs than it was planned with: with capacity pricing
  // (learned from a week of load history) that hour's price rose, so it is
  // placed again; `second` was planned with it there. Without pricing
  // `first` still fits and nothing changed for it.
  for (bool priced : {true, false}) {
    SCOPED_TRACE(priced ? "capacity pricing" : "no capacity pricing");
    SchedulerOptions so;
    so.replan_period_ms = kHour;
    Core core(so);
    if (priced)
      for (int64_t h = kT0 - 168 * kHour; h < kT0; h += kHour) core.store->record_load({h, 1, 2});
    core.regions = parse_regions_yaml("regions:\n  - {name: DE, nodes: 2, zone: DE}\n", "test");
    std::map<std::string, Executor*> ex{{"DE", &core.fake}};
    core.sched = std::make_unique<Scheduler>(*core.registry, core.clock, core.regions, ex, &core.metrics, core.so);
    ASSERT_EQ(core.sched->expected_load().ready(), priced);
    core.submit("first", {{"regions", {"DE"}}, {"max_delay_s", 10 * 3600}});
    core.sched->cycle();
    core.clock.set_ms(kT0 + kHour / 2);
    core.submit("second", {{"regions", {"DE"}}, {"max_delay_s", 10 * 3600}});
    EXPECT_TRUE(core.sched->cycle().replan.empty());
    ASSERT_EQ(core.job("first").placement->start_ms, kT0 + 5 * kHour);
    ASSERT_EQ(core.job("second").placement->start_ms, kT0 + 5 * kHour);
    core.clock.set_ms(kT0 + kHour);
    const CycleReport rep = core.sched->cycle();
    EXPECT_EQ(rep.replan.at(core.ids.at("first")),
              priced ? carbon::ReplanReason::kCapacityLost : carbon::ReplanReason::kUnchanged);
    EXPECT_EQ(rep.replan.at(core.ids.at("second")), carbon::ReplanReason::kUnchanged);
  }
}

TEST(SchedulerReplan, AfterARestartTheFirstReplanIsAFullOne) {
  SchedulerOptions so;
  so.replan_period_ms = kHour;
  Core core(so);
  plan_the_scenario(core);
  core.open();  // what the plans were made against is in memory only
  core.clock.set_ms(kT0 + kHour);
  CycleReport rep = core.sched->cycle();
  EXPECT_EQ(core.replaced(rep), (std::set<std::string>{"de", "fr", "both"}));
  for (const auto& [id, why] : rep.replan) EXPECT_EQ(why, carbon::ReplanReason::kNoBasis) << core.names.at(id);
  // That re-plan recorded what it planned against: the next one keeps all.
  core.clock.set_ms(kT0 + 2 * kHour);
  rep = core.sched->cycle();
  EXPECT_EQ(rep.replan.size(), 3u);
  EXPECT_EQ(core.replaced(rep), std::set<std::string>{});
}

TEST(SchedulerReplan, ARevisionMovesTheJobAndTheDecisionLogSaysWhy) {
  SchedulerOptions so;
  so.replan_period_ms = kHour;
  Core core(so);
  plan_the_scenario(core);
  core.forecasts.clean[{"FR", kT0 + 3 * kHour}] = 20;   // FR's 03:00 is now the cleanest
  core.clock.set_ms(kT0 + kHour);
  const CycleReport rep = core.sched->cycle();
  EXPECT_EQ(core.replaced(rep), (std::set<std::string>{"fr", "both"}));
  EXPECT_EQ(core.job("fr").placement->start_ms, kT0 + 3 * kHour);
  const auto log = core.store->decisions(core.ids.at("fr"));
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().outcome, DecisionOutcome::kReplanned);
  EXPECT_EQ(log.back().explanation.rfind("re-planned (forecast-revised): ", 0), 0u) << log.back().explanation;
}

// DE with one node, clean 03:00-05:00; no re-plan is due before 24:00.
// `low` (priority 0, 2 h, 8 h of slack) is planned there by one cycle.
void one_node_de_with_low_planned(Core& core) {
  core.regions = parse_regions_yaml("regions:\n  - {name: DE, nodes: 1, zone: DE}\n", "test");
  std::map<std::string, Executor*> ex{{"DE", &core.fake}};
  core.forecasts.clean[{"DE", kT0 + 3 * kHour}] = 100;
  core.forecasts.clean[{"DE", kT0 + 4 * kHour}] = 100;
  core.sched = std::make_unique<Scheduler>(*core.registry, core.clock, core.regions, ex, &core.metrics, core.so);
  core.submit("low", {{"regions", {"DE"}}, {"estimate", {{"duration_s", 2 * 3600}}}, {"max_delay_s", 8 * 3600}});
  core.sched->cycle();
}

TEST(SchedulerReplan, AHigherPriorityJobOnItsFallbackReleasesTheLowerPriorityPlanInItsWay) {
  // DE has one node, clean 03:00-05:00 where `low` (priority 0) is planned.
  // At 01:00 `urgent` (priority 5, 4 h, no slack) needs DE 01:00-05:00: a
  // pass leaves it to the fallback (05:00), so `low` is released, urgent
  // runs now and low is placed again after it, still by its deadline.
  SchedulerOptions so;
  so.replan_period_ms = 24 * kHour;   // no re-plan is due at 01:00
  Core core(so);
  one_node_de_with_low_planned(core);
  ASSERT_EQ(core.job("low").state(), JobState::kScheduled);
  ASSERT_EQ(core.job("low").placement->start_ms, kT0 + 3 * kHour);
  core.clock.set_ms(kT0 + kHour);
  core.submit("urgent", {{"regions", {"DE"}}, {"priority", 5}, {"estimate", {{"duration_s", 4 * 3600}}},
                         {"max_delay_s", 0}});
  const CycleReport rep = core.sched->cycle();
  ASSERT_EQ(rep.replan.count(core.ids.at("low")), 1u);
  EXPECT_EQ(rep.replan.at(core.ids.at("low")), carbon::ReplanReason::kHigherPriority);
  EXPECT_EQ(core.job("urgent").state(), JobState::kRunning);
  const Job low = core.job("low");
  EXPECT_EQ(low.state(), JobState::kScheduled);
  EXPECT_GE(low.placement->start_ms, kT0 + 5 * kHour);
  EXPECT_LE(low.placement->windows.back().second, kT0 + 10 * kHour);   // its deadline
}

TEST(SchedulerReplan, AnArrivalOfEqualPriorityReleasesNothing) {
  SchedulerOptions so;
  so.replan_period_ms = 24 * kHour;
  Core core(so);
  one_node_de_with_low_planned(core);
  core.clock.set_ms(kT0 + kHour);
  core.submit("same", {{"regions", {"DE"}}, {"estimate", {{"duration_s", 4 * 3600}}}, {"max_delay_s", 0}});
  const CycleReport rep = core.sched->cycle();
  EXPECT_TRUE(rep.replan.empty());
  EXPECT_EQ(core.job("low").placement->start_ms, kT0 + 3 * kHour);
}

}  // namespace
