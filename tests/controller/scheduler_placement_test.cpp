// The scheduler's one placement path (carbon::schedule_pass over a ledger of
// reservations, running gangs and capacity), driven by a ManualClock with a
// real SQLite store and the scripted FakeExecutor: no processes. Tables are
// keyed by a sentence.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>

#include <carbon/hardware.h>

#include <cmath>
#include <memory>
#include <regex>

#include "common/spawn.h"
#include "controller/config/config_files.h"
#include "controller/scheduling/scheduler.h"
#include "fake_executor.h"

using namespace controller;
using ctltest::FakeExecutor;

namespace {

constexpr int64_t kHour = carbon::kHourMs;
constexpr int64_t kT0 = 1764633600000;  // 2025-12-02T00:00:00Z: hour-of-day 0

// A 24-value hourly profile: `base` everywhere but `dips` (hour -> value).
std::string hourly(double base, std::map<int, double> dips = {}) {
  std::string s = "[";
  for (int h = 0; h < 24; ++h) s += (h ? ", " : "") + std::to_string(dips.count(h) ? dips[h] : base);
  return s + "]";
}

// A controller core: store, registry, scheduler over FakeExecutor.
struct Core {
  explicit Core(const std::string& regions_yaml, SchedulerOptions so = {}, int64_t now = kT0,
                const std::string& db = "")
      : clock(now) {
    path = db.empty() ? dir.file("c.db") : db;
    open(regions_yaml, so);
  }
  void open(const std::string& regions_yaml, SchedulerOptions so) {
    sched.reset();
    registry.reset();
    store.reset();
    store = std::make_unique<Store>(path);
    registry = std::make_unique<Registry>(*store, clock);
    registry->load();
    regions = parse_regions_yaml(regions_yaml, "test");
    std::map<std::string, Executor*> ex;
    for (auto& r : regions) ex[r.name] = &fake;
    sched = std::make_unique<Scheduler>(*registry, clock, regions, ex, &metrics, so);
  }
  std::string submit(nlohmann::json s) {
    if (!s.contains("name")) s["name"] = "t";
    if (!s.contains("worker")) s["worker"] = {{"data", {{"train", "t.bin"}}}};
    return registry->submit("team-a", parse_job_spec(s), "").job.id();
  }
  Job job(const std::string& id) const { return *registry->get(id); }
  double avoided() const {
    std::smatch m;
    const std::string text = metrics.render();
    static const std::regex re("greenshard_carbon_avoided_grams_total ([0-9.e+-]+)");
    return std::regex_search(text, m, re) ? std::stod(m[1]) : NAN;
  }

  gstest::TempDir dir;
  std::string path;
  ManualClock clock;
  Metrics metrics;
  FakeExecutor fake;
  std::unique_ptr<Store> store;
  std::unique_ptr<Registry> registry;
  std::vector<RegionConfig> regions;
  std::unique_ptr<Scheduler> sched;
};

// ---------------------------------------------------------------------------
// Where and when one job is placed.

struct PlaceCase;
void PrintTo(const PlaceCase& c, std::ostream* os);

struct PlaceCase {
  const char* sentence;
  std::string regions;
  nlohmann::json spec;
  std::string state;        // after one cycle
  std::string region;       // "" unless SCHEDULED/RUNNING
  std::string policy;
  int64_t start_h = 0;      // first window, hours after kT0
  size_t windows = 1;
  carbon::Policy scheduler_policy = carbon::Policy::kSpatioTemporal;
};

std::vector<PlaceCase> place_cases() {
  const std::string de_clean_at_1 = "regions:\n  - {name: DE, nodes: 4, hourly: " + hourly(300, {{1, 100}}) + "}\n";
  const std::string de_fr = "regions:\n  - {name: DE, nodes: 4, intensity: 300}\n  - {name: FR, nodes: 1, intensity: 50}\n";
  return {
      {"without slack a job runs now at home", de_clean_at_1, {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3600}}}},
       "RUNNING", "DE", "spatio-temporal", 0},
      {"with slack a job waits for the clean hour", de_clean_at_1,
       {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3600}}}, {"max_delay_s", 3 * 3600}}, "SCHEDULED", "DE",
       "spatio-temporal", 1},
      {"a cleaner allowed region wins now", de_fr, {{"regions", {"DE", "FR"}}, {"home_region", "DE"}}, "RUNNING", "FR",
       "spatio-temporal", 0},
      {"a cleaner region too small for the job is skipped", de_fr,
       {{"regions", {"DE", "FR"}}, {"home_region", "DE"}, {"nodes", 2}}, "RUNNING", "DE", "spatio-temporal", 0},
      {"an interruptible job takes the two clean spells apart",
       "regions:\n  - {name: DE, nodes: 4, hourly: " + hourly(500, {{0, 100}, {1, 100}, {3, 100}, {4, 100}}) + "}\n",
       {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3 * 3600}}}, {"max_delay_s", 3 * 3600}, {"interruptible", true}},
       "RUNNING", "DE", "spatio-temporal", 0, 2},
      {"a job larger than every region fails as unplaceable", de_fr, {{"regions", {"DE"}}, {"nodes", 5}}, "FAILED"},
      {"a job needing more GPUs per node than any region has fails", de_fr,
       {{"regions", {"DE", "FR"}}, {"gpus_per_node", 8}}, "FAILED"},
      {"a deadline that cannot be met runs as early as possible", de_clean_at_1,
       {{"regions", {"DE"}}, {"estimate", {{"duration_s", 7200}}}, {"deadline", "2025-12-02T01:00:00Z"}}, "RUNNING",
       "DE", "deadline-infeasible", 0},
      {"a job longer than the 48 h look-ahead runs now", de_clean_at_1,
       {{"regions", {"DE"}}, {"estimate", {{"duration_s", 81 * 3600}}}, {"max_delay_s", 24 * 3600}}, "RUNNING", "DE",
       "spatio-temporal", 0},
      {"an interruptible job longer than the look-ahead runs now too", de_clean_at_1,
       {{"regions", {"DE"}}, {"estimate", {{"duration_s", 81 * 3600}}}, {"max_delay_s", 24 * 3600},
        {"interruptible", true}},
       "RUNNING", "DE", "spatio-temporal", 0},
      {"the fifo baseline runs now at home although another region is cleaner", de_fr,
       {{"regions", {"DE", "FR"}}, {"home_region", "DE"}}, "RUNNING", "DE", "fifo", 0, 1, carbon::Policy::kRunNowHome},
  };
}

void PrintTo(const PlaceCase& c, std::ostream* os) { *os << c.sentence; }

class PlaceTable : public ::testing::TestWithParam<PlaceCase> {};
TEST_P(PlaceTable, OneCycle) {
  const PlaceCase& c = GetParam();
  SchedulerOptions so;
  so.placement.policy = c.scheduler_policy;
  Core core(c.regions, so);
  const std::string id = core.submit(c.spec);
  core.sched->cycle();
  const Job j = core.job(id);
  EXPECT_EQ(to_string(j.state()), c.state) << (j.conditions().empty() ? "" : j.conditions().back().message);
  if (c.region.empty()) {
    EXPECT_FALSE(j.failure_reason.empty());
    EXPECT_TRUE(core.registry->reservations().empty());
    return;
  }
  ASSERT_TRUE(j.placement);
  EXPECT_EQ(j.placement->region, c.region) << j.placement->explanation;
  EXPECT_EQ(j.placement->policy, c.policy) << j.placement->explanation;
  ASSERT_EQ(j.placement->windows.size(), c.windows) << j.placement->explanation;
  EXPECT_EQ(j.placement->windows.front().first, kT0 + c.start_h * kHour);
  int64_t total = 0;
  for (auto [a, b] : j.placement->windows) total += b - a;
  EXPECT_EQ(total, int64_t(j.spec().duration_s * 1000) + int64_t(c.windows - 1) * 600 * 1000);
  EXPECT_LE(j.placement->expected_grams, j.placement->run_now_home_grams + 1e-6);
  // The windows are the job's reservations, in memory and in the store.
  EXPECT_EQ(core.registry->reservations().size(), c.windows);
  EXPECT_EQ(core.store->load_reservations(), core.registry->reservations());
}
INSTANTIATE_TEST_SUITE_P(SchedulerPlacement, PlaceTable, ::testing::ValuesIn(place_cases()),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

// ---------------------------------------------------------------------------

TEST(SchedulerPlacement, TwoDelayTolerantJobsNeverHoldTheSameCapacity) {
  // One node; hour 3 is by far the cleanest. Both jobs may wait 6 h for it.
  Core core("regions:\n  - {name: DE, nodes: 1, hourly: " + hourly(400, {{3, 20}, {4, 300}}) + "}\n");
  const nlohmann::json s = {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3600}}}, {"max_delay_s", 6 * 3600}};
  const std::string a = core.submit(s), b = core.submit(s);
  core.sched->cycle();
  ASSERT_EQ(core.job(a).state(), JobState::kScheduled);
  ASSERT_EQ(core.job(b).state(), JobState::kScheduled);
  const auto wa = core.job(a).placement->windows, wb = core.job(b).placement->windows;
  EXPECT_EQ(wa.front().first, kT0 + 3 * kHour);   // the older job gets the clean hour
  EXPECT_EQ(wb.front().first, kT0 + 4 * kHour);   // the other the next best, not the same hour
  // Every hour holds at most the region's one node, by the stored reservations.
  auto rs = core.store->load_reservations();
  ASSERT_EQ(rs.size(), 2u);
  for (int64_t h = kT0; h < kT0 + 8 * kHour; h += kHour) {
    int used = 0;
    for (const auto& r : rs)
      if (r.start_ms < h + kHour && h < r.end_ms) used += r.nodes;
    EXPECT_LE(used, 1) << "hour " << (h - kT0) / kHour;
  }
  // Both run in their own hour, one after the other, never requeued.
  const auto ran = FakeExecutor::status(GangPhase::kSucceeded, "", {{"state", "succeeded"}});
  core.fake.script(a, {ran});  // each gang is done by the next hour's poll
  core.fake.script(b, {ran});
  for (int h = 1; h <= 5; ++h) {
    core.clock.set_ms(kT0 + h * kHour);
    core.sched->cycle();
  }
  EXPECT_EQ(core.fake.starts().size(), 2u);
  for (const auto& id : {a, b}) {
    const Job j = core.job(id);
    for (const auto& c : j.conditions()) EXPECT_NE(c.reason, "CapacityLost") << c.message;
  }
}

TEST(SchedulerPlacement, ReservationsAreReleasedWhenTheJobEndsOrIsCancelled) {
  Core core("regions:\n  - {name: DE, nodes: 2, hourly: " + hourly(400, {{2, 50}}) + "}\n");
  const nlohmann::json s = {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3600}}}, {"max_delay_s", 4 * 3600}};
  const std::string done = core.submit(s), cancelled = core.submit(s);
  core.sched->cycle();
  ASSERT_EQ(core.store->load_reservations().size(), 2u);
  auto c = core.registry->update(cancelled, kAllTenants, [&](Job& j) {
    return j.transition(JobState::kCancelled, "Cancelled", "by the test", core.clock.now_ms());
  });
  ASSERT_TRUE(c);
  EXPECT_EQ(core.store->load_reservations().size(), 1u);
  core.fake.script(done, {FakeExecutor::status(GangPhase::kRunning),
                          FakeExecutor::status(GangPhase::kSucceeded, "", {{"state", "succeeded"}})});
  core.clock.set_ms(kT0 + 2 * kHour);
  core.sched->cycle();  // starts
  EXPECT_EQ(core.job(done).state(), JobState::kRunning);
  EXPECT_EQ(core.store->load_reservations().size(), 1u);  // a running gang keeps its reservation
  core.clock.set_ms(kT0 + 3 * kHour);
  core.sched->cycle();  // running
  core.sched->cycle();  // succeeded
  EXPECT_EQ(core.job(done).state(), JobState::kSucceeded);
  EXPECT_TRUE(core.store->load_reservations().empty());
  EXPECT_TRUE(core.registry->reservations().empty());
}

// An intensity source whose forecast the test changes between cycles.
class Settable final : public IntensitySource {
 public:
  std::vector<ForecastPoint> forecast(const std::string&, int64_t now_ms, int horizon_h) const override {
    std::vector<ForecastPoint> out;
    const int64_t h0 = now_ms / kHour * kHour;
    for (int h = 0; h <= horizon_h; ++h) {
      const int64_t t = h0 + h * kHour;
      out.push_back({t, values.count(t) ? values.at(t) : 400.0});
    }
    return out;
  }
  std::map<int64_t, double> values;
};

TEST(SchedulerPlacement, ReplanningMovesANotStartedJobToTheNewCleanestHour) {
  Settable src;
  src.values[kT0 + 5 * kHour] = 100;
  SchedulerOptions so;
  so.intensity = &src;
  so.replan_period_ms = kHour;
  Core core("regions:\n  - {name: DE, nodes: 1, zone: DE}\n", so);
  const std::string id = core.submit({{"regions", {"DE"}}, {"estimate", {{"duration_s", 3600}}}, {"max_delay_s", 8 * 3600}});
  core.sched->cycle();
  ASSERT_EQ(core.job(id).placement->start_ms, kT0 + 5 * kHour);
  // The forecast changes: hour 3 is now the cleanest. Within the period: no re-plan.
  src.values[kT0 + 3 * kHour] = 20;
  core.clock.set_ms(kT0 + kHour / 2);
  core.sched->cycle();
  EXPECT_EQ(core.job(id).placement->start_ms, kT0 + 5 * kHour);
  core.clock.set_ms(kT0 + kHour);
  core.sched->cycle();
  const Job j = core.job(id);
  EXPECT_EQ(j.state(), JobState::kScheduled);
  EXPECT_EQ(j.placement->start_ms, kT0 + 3 * kHour);
  // The old reservation is gone, the new one stored.
  auto rs = core.store->load_reservations();
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].start_ms, kT0 + 3 * kHour);
  auto log = core.store->decisions(id);
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().outcome, controller::DecisionOutcome::kReplanned);
}

TEST(SchedulerPlacement, CarbonAvoidedIsCountedOncePerJobAlsoWhenRequeued) {
  // DE (1 node): a job without slack runs now; its gang overruns its window.
  // The second job, planned after it, loses its node at its window, is
  // placed again and runs later: its avoided grams are counted once.
  SchedulerOptions so;
  so.replan_period_ms = 0;
  Core core("regions:\n  - {name: DE, nodes: 1, hourly: " + hourly(400, {{1, 100}}) + "}\n  - {name: FR, nodes: 1, intensity: 900}\n", so);
  const std::string first = core.submit({{"regions", {"DE"}}, {"estimate", {{"duration_s", 1800}}}});
  core.sched->cycle();
  ASSERT_EQ(core.job(first).state(), JobState::kRunning);
  const std::string second =
      core.submit({{"regions", {"DE", "FR"}}, {"home_region", "FR"}, {"estimate", {{"duration_s", 3600}}}, {"max_delay_s", 6 * 3600}});
  core.clock.set_ms(kT0 + kHour / 2);
  core.sched->cycle();
  ASSERT_EQ(core.job(second).state(), JobState::kScheduled);
  ASSERT_EQ(core.job(second).placement->start_ms, kT0 + kHour);
  const double per_job = core.job(second).placement->run_now_home_grams - core.job(second).placement->expected_grams;
  ASSERT_GT(per_job, 0);
  const double before = core.avoided();
  core.clock.set_ms(kT0 + kHour);
  core.sched->cycle();  // the first gang still runs: the second is requeued
  EXPECT_EQ(core.job(second).state(), JobState::kPending);
  bool requeued = false;
  const Job requeued_job = core.job(second);
  for (const auto& c : requeued_job.conditions()) requeued = requeued || c.reason == "CapacityLost";
  EXPECT_TRUE(requeued);
  core.fake.script(first, {FakeExecutor::status(GangPhase::kSucceeded, "", {{"state", "succeeded"}})});
  for (int i = 0; i < 6 && core.job(second).state() != JobState::kRunning; ++i) {
    core.clock.advance_ms(kHour);
    core.sched->cycle();
  }
  ASSERT_EQ(core.job(second).state(), JobState::kRunning);
  EXPECT_EQ(core.fake.starts().size(), 2u);
  const double counted = core.avoided() - before;
  const double now_avoided = core.job(second).placement->run_now_home_grams - core.job(second).placement->expected_grams;
  EXPECT_NEAR(counted, now_avoided, 1e-6);  // once, for the plan it ran
}

TEST(SchedulerPlacement, AClosedWindowSuspendsAGangThatIsAlreadyDownInTheSameCycle) {
  Core core("regions:\n  - {name: DE, nodes: 1, hourly: " + hourly(500, {{0, 100}, {1, 100}, {3, 100}, {4, 100}}) + "}\n");
  const std::string id = core.submit(
      {{"regions", {"DE"}}, {"estimate", {{"duration_s", 3 * 3600}}}, {"max_delay_s", 3 * 3600}, {"interruptible", true}});
  core.sched->cycle();
  ASSERT_EQ(core.job(id).state(), JobState::kRunning);
  ASSERT_EQ(core.job(id).placement->windows.size(), 2u);
  core.clock.set_ms(kT0 + kHour);
  core.sched->cycle();
  EXPECT_EQ(core.job(id).state(), JobState::kRunning);  // inside window 1
  core.clock.set_ms(kT0 + 2 * kHour);
  core.sched->cycle();  // window 1 closed: stop() and the fake gang is down at once
  EXPECT_EQ(core.job(id).state(), JobState::kSuspended);
  EXPECT_EQ(core.fake.stops().size(), 1u);
  core.clock.set_ms(kT0 + 3 * kHour);
  core.sched->cycle();
  EXPECT_EQ(core.job(id).state(), JobState::kRunning);
  EXPECT_EQ(core.fake.starts().size(), 2u);
}

TEST(SchedulerPlacement, CapacityPricingLearnsFromTheStoresLoadHistoryAcrossARestart) {
  const std::string regions = "regions:\n  - {name: DE, nodes: 4, intensity: 300}\n";
  Core core(regions);
  // A week of recorded load, as earlier cycles wrote it: hour h busy h % 5 nodes of 4.
  const int64_t monday = kT0 - 24 * kHour - 7 * 24 * kHour;  // 2025-11-24 (a Monday) 00:00 UTC
  for (int h = 0; h < 8 * 24; ++h) core.store->record_load({monday + h * kHour, double(h % 5), 4});
  EXPECT_FALSE(core.sched->expected_load().ready());  // built before the history existed
  core.open(regions, {});                              // a restart
  const auto& e = core.sched->expected_load();
  ASSERT_TRUE(e.ready());
  auto v = e.by_hour_of_week();
  // Hour-of-week 0 was seen twice (weeks 1 and 2): 0/4, then moved by 0.3 towards (168 % 5)/4.
  EXPECT_NEAR(v[0], 0.3 * (168 % 5) / 4.0, 1e-12);
  EXPECT_NEAR(v[100], (100 % 5) / 4.0, 1e-12);
  // A cycle records this hour's realized load; the next hour's cycle learns it.
  const std::string id = core.submit({{"regions", {"DE"}}, {"nodes", 3}, {"estimate", {{"duration_s", 7200}}}});
  core.sched->cycle();
  ASSERT_EQ(core.job(id).state(), JobState::kRunning);
  auto hist = core.store->load_history();
  ASSERT_FALSE(hist.empty());
  EXPECT_EQ(hist.back().hour_ms, kT0);
  EXPECT_EQ(hist.back().busy_nodes, 3);
  EXPECT_EQ(hist.back().capacity_nodes, 4);
  core.clock.set_ms(kT0 + kHour);
  core.sched->cycle();
  EXPECT_EQ(core.sched->expected_load().last_observed(), carbon::from_unix(kT0 / 1000));
}

TEST(SchedulerPlacement, TheRegionsHardwareAddsItsServersEmbodiedGramsToThePlan) {
  // Flat 100 g/kWh; a 2-node job for 2 h at 300 W per node.
  const std::string regions = "regions:\n  - {name: GB, nodes: 4, intensity: 100}\n";
  const nlohmann::json s = {{"regions", {"GB"}}, {"nodes", 2}, {"estimate", {{"duration_s", 7200}, {"power_watts", 300}}}};
  Core without(regions);
  const std::string a = without.submit(s);
  without.sched->cycle();
  Core with(regions);
  auto rs = parse_regions_yaml(regions, "test");
  apply_hardware_yaml("regions:\n  \"GB\": \"h200-sxm-8\"\n", "hw.yaml", rs);
  std::map<std::string, Executor*> ex{{"GB", &with.fake}};
  with.sched = std::make_unique<Scheduler>(*with.registry, with.clock, rs, ex, &with.metrics, SchedulerOptions{});
  const std::string b = with.submit(s);
  with.sched->cycle();
  const double g0 = without.job(a).placement->expected_grams, g1 = with.job(b).placement->expected_grams;
  // Operational: 2 x 300 W x 2 h x 100 g/kWh = 120 g (PUE 1), in both.
  EXPECT_NEAR(g0, 120.0, 1e-6);
  const auto& hw = carbon::hardware_profile("h200-sxm-8");
  const double m = 2 * 2.0 * hw.embodied_kg_per_server * 1000 / (hw.lifetime_years * 8760);
  EXPECT_GT(m, 0);
  EXPECT_NEAR(g1 - g0, m, 1e-6) << with.job(b).placement->explanation;
}

}  // namespace

namespace {

TEST(SchedulerPlacement, AGangPreemptedByTheClusterRestartsWithoutUsingARestart) {
  SchedulerOptions so;
  so.backoff_base_ms = 1000;
  Core core("regions:\n  - {name: DE, nodes: 1, intensity: 300}\n", so);
  const std::string id = core.submit({{"regions", {"DE"}}, {"max_restarts", 0}});
  core.sched->cycle();
  ASSERT_EQ(core.job(id).state(), JobState::kRunning);
  core.fake.script(id, {FakeExecutor::status(GangPhase::kPreempted, "evicted", {{"state", "preempted"}}),
                        FakeExecutor::status(GangPhase::kRunning)});
  core.sched->cycle();
  Job j = core.job(id);
  ASSERT_EQ(j.state(), JobState::kRecovering);  // with max_restarts 0 a failure would be FAILED
  EXPECT_EQ(j.recovery_count, 0);
  EXPECT_EQ(j.conditions().back().reason, "Preempted");
  core.clock.advance_ms(1000);
  core.sched->cycle();
  EXPECT_EQ(core.job(id).state(), JobState::kRunning);
  EXPECT_EQ(core.fake.starts().size(), 2u);
}

}  // namespace
