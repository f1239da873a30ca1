// The service engine of the simulator: the controller's own Scheduler
// replaying a trace (controller/tools/sim_engine.h) must make the decisions the
// library engine (carbon::simulate) makes on the same trace and forecast.
#include <gtest/gtest.h>

#include <carbon/time_ms.h>

#include <carbon/catalog.h>
#include <carbon/hardware.h>
#include <carbon/trace.h>

#include "common/spawn.h"
#include "controller/tools/sim_engine.h"
#include "half_hourly_data.h"
#include "controller/store/store.h"

using namespace controller;

namespace {

struct Scenario {
  carbon::Catalog catalog = carbon::Catalog::load(carbon::builtin_data_dir(), {"GB", "DE", "CA-ON"});
  carbon::SimConfig config;
  std::vector<carbon::Job> trace;
  explicit Scenario(int capacity = 128, double jobs_per_workday = 6) {
    const auto& hw = carbon::hardware_profile("h100-sxm-8");
    for (const auto& z : catalog.ids()) {
      config.regions.push_back({z, capacity, 1.2, hw});
      config.actual[z] = catalog.series(z);
    }
    config.placement.max_lookahead = carbon::Hours{120};
    carbon::TraceOptions to;
    to.seed = 7;
    to.regions = catalog.ids();
    to.from = carbon::parse_time("2023-03-06T00:00Z");
    to.to = carbon::parse_time("2023-03-25T00:00Z");   // long enough for capacity pricing to start
    to.jobs_per_workday = jobs_per_workday;
    to.max_hours = 40;
    trace = carbon::generate_trace(to);
  }
};

void expect_same_decisions(const carbon::PolicyResult& lib, const carbon::PolicyResult& svc) {
  ASSERT_EQ(lib.outcomes.size(), svc.outcomes.size());
  for (size_t i = 0; i < lib.outcomes.size(); ++i) {
    const auto& a = lib.outcomes[i];
    const auto& b = svc.outcomes[i];
    EXPECT_EQ(a.region, b.region) << a.job_id;
    ASSERT_EQ(a.windows.size(), b.windows.size()) << a.job_id;
    for (size_t w = 0; w < a.windows.size(); ++w) {
      EXPECT_EQ(a.windows[w].start, b.windows[w].start) << a.job_id << " window " << w;
      EXPECT_EQ(a.windows[w].end, b.windows[w].end) << a.job_id << " window " << w;
      // Each window's own region and width (unset: the decision's, the job's).
      auto region = [](const carbon::JobOutcome& o, size_t k) {
        return o.windows[k].region.empty() ? o.region : o.windows[k].region;
      };
      EXPECT_EQ(region(a, w), region(b, w)) << a.job_id << " window " << w;
      if (a.windows[w].gpus > 0 && b.windows[w].gpus > 0)
        EXPECT_EQ(a.windows[w].gpus, b.windows[w].gpus) << a.job_id << " window " << w;
    }
  }
  EXPECT_NEAR(lib.total_grams, svc.total_grams, 1e-6 * lib.total_grams);
  EXPECT_EQ(lib.deadline_misses, svc.deadline_misses);
}

// The policies compared across the engines: the library's and the service's name for each.
const std::pair<carbon::SimPolicy, carbon::Policy> kBothEnginesPolicies[] = {
    {carbon::SimPolicy::kSpatioTemporal, carbon::Policy::kSpatioTemporal},
    {carbon::SimPolicy::kFifo, carbon::Policy::kRunNowHome}};

TEST(ServiceSimulation, TheSchedulerMakesTheLibrarysDecisionsWithCapacityTight) {
  // Tight capacity (jobs wait, fall back, and capacity prices are learned).
  Scenario s(64, 10);
  ASSERT_GT(s.trace.size(), 100u);
  ServiceSimOptions o;
  for (auto [lp, sp] : kBothEnginesPolicies) {
    SCOPED_TRACE(carbon::sim_policy_name(lp));
    auto lib = carbon::simulate(s.trace, s.config, lp);
    o.policy = sp;
    ServiceSimStats stats;
    auto svc = simulate_service(s.trace, s.config, s.catalog, o, &stats);
    EXPECT_EQ(svc.engine, "service");
    EXPECT_GT(stats.cycles, 24 * 19);
    expect_same_decisions(lib, svc);
  }
}

TEST(ServiceSimulation, ElasticAndMigratableJobsGetTheLibrarysPlansWindowByWindow) {
  Scenario s(128, 6);
  int elastic = 0;
  for (size_t i = 0; i < s.trace.size(); ++i) {
    auto& j = s.trace[i];
    carbon::make_elastic(j, 8);   // whole servers: the service's nodes
    j.migratable = i % 2 == 0;
    ++elastic;
  }
  ASSERT_GT(elastic, 20);
  auto lib = carbon::simulate(s.trace, s.config, carbon::SimPolicy::kSpatioTemporal);
  int changed = 0;
  for (const auto& o : lib.outcomes)
    for (size_t w = 1; w < o.windows.size(); ++w)
      changed += o.windows[w].gpus != o.windows[w - 1].gpus || o.windows[w].region != o.windows[w - 1].region;
  ASSERT_GT(changed, 5) << "the scenario exercises resizes and moves";
  auto svc = simulate_service(s.trace, s.config, s.catalog, {});
  expect_same_decisions(lib, svc);
}

TEST(ServiceSimulation, ForecastErrorAndReplanningGoThroughTheSamePath) {
  // Incremental re-plans (carbon/replan.h: both engines select the plans to
  // place again with the same code) and full ones. The blend forecaster
  // revises nearly every span by more than 5 % in 6 h; at 30 % some plans
  // are placed again and some are left untouched.
  for (bool incremental : {true, false}) {
    SCOPED_TRACE(incremental ? "incremental" : "full");
    Scenario s(128, 6);
    s.config.forecaster = carbon::make_forecaster("blend");
    s.config.replan_every = carbon::Hours{6};
    s.config.replan.incremental = incremental;
    s.config.replan.forecast_threshold = 0.3;
    auto lib = carbon::simulate(s.trace, s.config, carbon::SimPolicy::kSpatioTemporal);
    EXPECT_GT(lib.replan_placed, 0);
    if (incremental) EXPECT_GT(lib.replan_untouched, 0);
    ServiceSimOptions o;
    o.forecaster = "blend";
    o.replan_period_ms = 6 * carbon::kHourMs;
    auto svc = simulate_service(s.trace, s.config, s.catalog, o);
    expect_same_decisions(lib, svc);
  }
}

// 30-minute data (written from the shipped 2023 data, each hour's first half
// above its value and the second below): the service's clock steps every
// 30 minutes and its scheduler plans at the file source's step, so it makes
// the library's decisions, windows at half past included, with capacity
// tight (jobs wait and fall back) and interruptible jobs' windows.
TEST(ServiceSimulation, ThirtyMinuteDataGivesTheLibrarysHalfHourDecisions) {
  gstest::TempDir dir;
  const carbon::Catalog half =
      carbon::Catalog::load(gstest::write_half_hourly_data(dir.file("data"), {"GB", "DE", "CA-ON"}, 90, 0.3));
  Scenario s(64, 6);
  for (const auto& z : half.ids()) {
    ASSERT_EQ(half.series(z).step(), std::chrono::minutes{30});
    s.config.actual[z] = half.series(z);
  }
  // Capacity pricing off: the engines learn an hour's realized load
  // differently once cycles run within the hour (the service: the hour's
  // last cycle, where a job that ended earlier in the hour no longer counts;
  // the library: every window that overlapped the hour). Hourly cycles
  // sample once per hour and agree (the tests above).
  s.config.learn_expected_load = false;
  ServiceSimOptions o;
  for (auto [lp, sp] : kBothEnginesPolicies) {
    SCOPED_TRACE(carbon::sim_policy_name(lp));
    auto lib = carbon::simulate(s.trace, s.config, lp);
    o.policy = sp;
    ServiceSimStats stats;
    auto svc = simulate_service(s.trace, s.config, half, o, &stats);
    EXPECT_GT(stats.cycles, 2 * 24 * 19) << "a cycle every 30 minutes";
    EXPECT_GT(stats.hours, 24 * 19);
    EXPECT_LT(stats.hours, stats.cycles);
    expect_same_decisions(lib, svc);
    int half_past = 0;
    for (const auto& out : svc.outcomes)
      for (const auto& w : out.windows) {
        EXPECT_EQ(carbon::floor_to_step(w.start, std::chrono::minutes{30}), w.start) << out.job_id;
        half_past += carbon::floor_hour(w.start) != w.start;
      }
    EXPECT_GT(half_past, 0);
    // The scenario exercises waiting (FIFO) and interruptible windows (ours).
    int waited = 0, split = 0;
    for (size_t i = 0; i < s.trace.size(); ++i) {
      waited += svc.outcomes[i].windows.front().start > carbon::ceil_to_step(s.trace[i].submit, std::chrono::minutes{30});
      split += svc.outcomes[i].windows.size() > 1;
    }
    EXPECT_GT(lp == carbon::SimPolicy::kFifo ? waited : split, 0);
  }
}

TEST(ServiceSimulation, ARealSqliteFileHoldsEveryJobAndNoReservationAfterTheReplay) {
  Scenario s(128, 3);
  gstest::TempDir dir;
  ServiceSimOptions o;
  o.store_path = dir.file("sim.db");
  auto out = replay_through_scheduler(s.trace, s.config, s.catalog, o);
  ASSERT_EQ(out.size(), s.trace.size());
  Store store(o.store_path);
  auto jobs = store.load_all();
  ASSERT_EQ(jobs.size(), s.trace.size());
  for (const auto& j : jobs) EXPECT_EQ(j.state(), JobState::kSucceeded) << j.id();
  EXPECT_TRUE(store.load_reservations().empty());
  EXPECT_FALSE(store.load_history().empty());
}

TEST(ServiceSimulation, JobsThatAreNotWholeServersAreRefused) {
  Scenario s(128, 3);
  s.trace.front().gpus = 3;
  EXPECT_THROW(replay_through_scheduler(s.trace, s.config, s.catalog, {}), std::runtime_error);
}

}  // namespace
