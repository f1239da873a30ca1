// Elastic and migratable placement (carbon/src/elastic_plan.*, through
// place()), the scaling curve, per-window reservations and the
// simulator's accounting of windows in several regions and widths.
#include "carbon/error.h"
#include "carbon/placement.h"
#include "carbon/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace carbon {
namespace {

const Time kNow = parse_time("2023-06-05T00:00Z");  // a Monday, on the hour

// 1 kW per GPU, no idle power, no overhead, no embodied: grams = GPUs * sum(I).
HardwareProfile plain() { return HardwareProfile{"plain", "GPU", 8, 1000, 0, 0, 0, 1}; }

Region region(const std::string& name, int capacity, std::vector<double> hourly) {
  Region g;
  g.name = name;
  g.capacity = capacity;
  g.pue = 1.0;
  g.hardware = plain();
  g.forecast = IntensitySeries(name, kNow, Hours{1}, std::move(hourly));
  return g;
}

// `hours` values: `base` except [a, b) -> v for each dip.
std::vector<double> series(int hours, double base, std::vector<std::tuple<int, int, double>> dips) {
  std::vector<double> v(static_cast<size_t>(hours), base);
  for (auto [a, b, x] : dips)
    for (int h = a; h < b; ++h) v[static_cast<size_t>(h)] = x;
  return v;
}

Job elastic_job(int gpus, int min_gpus, int max_gpus, int work_h, int deadline_h, bool migratable) {
  Job j;
  j.id = "e";
  j.gpus = gpus;
  j.min_gpus = min_gpus;
  j.max_gpus = max_gpus;
  j.migratable = migratable;
  j.duration = Hours{work_h};
  j.submit = kNow;
  j.deadline = kNow + Hours{deadline_h};
  j.home_region = "A";
  j.resume_overhead = Seconds{0};
  j.checkpoint_gb = 1e-6;
  return j;
}

PlacementOptions opts() {
  PlacementOptions o;
  o.policy = Policy::kSpatioTemporal;
  o.prefer_earlier_within = 0;
  o.max_lookahead = Hours{48};
  return o;
}

double hours(Seconds s) { return static_cast<double>(s.count()) / 3600.0; }

// Work a decision does: each window's run time after its change, times
// the speed at its width.
double work_done(const Job& job, const Decision& d, const ElasticCosts& c) {
  double w = 0;
  for (size_t i = 0; i < d.windows.size(); ++i) {
    const auto& x = d.windows[i];
    double ov = i == 0 ? 0 : hours(change_overhead(job, c, d.windows[i - 1].region != x.region));
    w += (hours(x.end - x.start) - ov) * job.speed(x.gpus);
  }
  return w;
}

// A pass does not plan a region whose floor (its cheapest hour for the
// job's work) shows it cannot beat the plan in hand. Skipping must never
// drop the winner: over random regions (real hardware, embodied carbon,
// capacity partly taken) and jobs of every kind, placing over all regions
// costs what the cheapest region alone costs -- or less, for a migratable
// job, which may also move between them.
TEST(ElasticPlan, SkippingRegionsThatCannotWinNeverLosesTheCheapest) {
  std::mt19937 rng(20261207);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  const HardwareProfile& hw = hardware_profile("h100-sxm-8");
  PlacementOptions o = opts();
  o.max_lookahead = Hours{72};
  int cases = 0, migratable_gained = 0;
  for (int trial = 0; trial < 240; ++trial) {
    std::vector<Region> regions;
    CapacityLedger ledger;
    // Half the trials: regions far apart; half: within 10 % of one another,
    // where a floor only a little too high would skip the cheapest.
    const bool close = trial >= 120;
    for (int r = 0; r < 6; ++r) {
      std::vector<double> v(96);
      const double base = close ? uni(300, 330) : uni(20, 700), swing = uni(0, 0.6);
      for (size_t h = 0; h < v.size(); ++h) v[h] = base * (1 + swing * std::sin(static_cast<double>(h) * uni(0.1, 0.4))) + uni(0, 30);
      Region g = region(std::string(1, static_cast<char>('A' + r)), 8 * pick(2, 8), std::move(v));
      g.hardware = hw;
      g.pue = uni(1.05, 1.6);
      for (int k = 0; k < 3; ++k) {
        const int a = pick(0, 60);
        ledger.reserve(g.name, {Window{kNow + Hours{a}, kNow + Hours{a + pick(1, 24)}}}, 8 * pick(1, g.capacity / 8));
      }
      regions.push_back(std::move(g));
    }
    const int kind = trial % 4;   // 0 fixed, 1 interruptible, 2 elastic, 3 elastic and migratable
    Job j = elastic_job(16, kind >= 2 ? 8 : 16, kind >= 2 ? 32 : 16, pick(2, 20), pick(30, 72), kind == 3);
    j.width_step = 8;
    j.interruptible = kind == 1;
    j.resume_overhead = std::chrono::minutes{10};
    j.checkpoint_gb = 0;   // the default per GPU
    if (kind >= 2) j.scaling = {{8, 1.0}, {16, 1.85}, {32, 3.4}};
    double cheapest_alone = std::numeric_limits<double>::infinity();
    for (const auto& g : regions) {
      Decision d = place(j, {g}, ledger, kNow, o);
      if (d.feasible) cheapest_alone = std::min(cheapest_alone, d.expected_grams);
    }
    Decision all = place(j, regions, ledger, kNow, o);
    ASSERT_EQ(all.feasible, std::isfinite(cheapest_alone)) << "trial " << trial;
    if (!all.feasible) continue;
    ++cases;
    if (kind == 3) {
      EXPECT_LE(all.expected_grams, cheapest_alone * (1 + 1e-9)) << "trial " << trial;
      migratable_gained += all.expected_grams < cheapest_alone * (1 - 1e-6) ? 1 : 0;
    } else {
      EXPECT_NEAR(all.expected_grams, cheapest_alone, cheapest_alone * 1e-9) << "trial " << trial << " kind " << kind;
    }
  }
  EXPECT_GE(cases, 200);            // most trials place the job
  EXPECT_GE(migratable_gained, 1);  // moving sometimes beats every single region
}

TEST(ElasticPlan, ShrinksInADirtyBlockThenMovesAndGrowsInACleanRegion) {
  // A: clean, then middling with one GPU free (one is planned), then dirty.
  // B: dirty, clean in hours 4-6. Five GPU-pair-hours of work by hour 6.
  std::vector<Region> regions = {region("A", 2, series(48, 900, {{0, 2, 100}, {2, 4, 300}})),
                                 region("B", 2, series(48, 900, {{4, 6, 100}}))};
  CapacityLedger planned;
  planned.reserve("A", kNow + Hours{2}, kNow + Hours{4}, 1);
  // A move costs at least a second of run time: one minute less work than
  // the blocks hold leaves room for it.
  Job job = elastic_job(2, 1, 2, 5, 6, true);
  job.duration -= Seconds{60};
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible) << d.explanation;
  ASSERT_EQ(d.windows.size(), 3u) << d.explanation;
  EXPECT_EQ(d.windows[0].region, "A");
  EXPECT_EQ(d.windows[0].gpus, 2);
  EXPECT_EQ(d.windows[0].start, kNow);
  EXPECT_EQ(d.windows[1].region, "A");
  EXPECT_EQ(d.windows[1].gpus, 1);
  EXPECT_EQ(d.windows[1].start, kNow + Hours{2});
  EXPECT_EQ(d.windows[2].region, "B");
  EXPECT_EQ(d.windows[2].gpus, 2);
  EXPECT_EQ(d.windows[2].start, kNow + Hours{4});
  EXPECT_LE(d.windows[2].end, kNow + Hours{6});
  EXPECT_GE(d.windows[2].end, kNow + Hours{6} - Seconds{60});
  EXPECT_EQ(d.region, "A");
  ASSERT_EQ(d.changes.size(), 2u);
  EXPECT_TRUE(d.changes[0].resize());
  EXPECT_FALSE(d.changes[0].move());
  EXPECT_TRUE(d.changes[1].move());
  EXPECT_TRUE(d.changes[1].resize());
  EXPECT_GT(d.changes[1].saved_grams, 0);
  EXPECT_NE(d.changes[1].why.find("move A -> B"), std::string::npos) << d.changes[1].why;
  EXPECT_NE(d.explanation.find("1 move(s)"), std::string::npos) << d.explanation;
  // grams = 2*2*100 + 1*2*300 + 2*(2 - the trimmed minute)*100 (+ the tiny transfer)
  EXPECT_NEAR(d.expected_grams, 1400 - 2 * 100 * hours(kNow + Hours{6} - d.windows[2].end), 1e-3);
  EXPECT_NEAR(work_done(job, d, opts().elastic), hours(job.duration), 1e-3);
}

TEST(ElasticPlan, WithoutMigrationTheJobStaysInOneRegion) {
  std::vector<Region> regions = {region("A", 2, series(48, 900, {{0, 2, 100}, {2, 4, 300}})),
                                 region("B", 2, series(48, 900, {{4, 6, 100}}))};
  CapacityLedger planned;
  Job job = elastic_job(2, 1, 2, 5, 12, false);
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible) << d.explanation;
  for (const auto& w : d.windows) EXPECT_TRUE(w.region.empty() || w.region == d.region) << w.region;
  for (const auto& c : d.changes) EXPECT_FALSE(c.move());
}

TEST(ElasticPlan, GrowsAboveItsWidthInCleanHoursOnASublinearCurve) {
  std::vector<Region> regions = {region("A", 8, series(48, 400, {{0, 4, 100}}))};
  CapacityLedger planned;
  Job job = elastic_job(4, 2, 8, 6, 12, false);
  job.scaling = {{2, 2.0}, {4, 3.6}, {8, 6.0}};
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_EQ(d.windows[0].gpus, 8) << d.explanation;
  for (const auto& w : d.windows) EXPECT_GT(w.gpus, job.gpus) << "wider than requested while it is clean";
  EXPECT_LE(d.end, kNow + Hours{4});
  EXPECT_NEAR(work_done(job, d, opts().elastic), 6.0, 1e-3);
}

TEST(ElasticPlan, WidthsGoInWholeSteps) {
  std::vector<double> a;
  for (int h = 0; h < 48; ++h) a.push_back(300 + 250 * std::sin(h * 0.7));
  std::vector<Region> regions = {region("A", 64, a)};
  CapacityLedger planned;
  planned.reserve("A", kNow + Hours{4}, kNow + Hours{10}, 44);   // 20 free: at most 16 in steps of 8
  Job job = elastic_job(16, 8, 32, 20, 40, false);
  job.width_step = 8;
  job.scaling = {{8, 0.54}, {16, 1.0}, {32, 1.85}};
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible) << d.explanation;
  bool resized = false;
  for (const auto& w : d.windows) {
    EXPECT_EQ(w.gpus % 8, 0) << w.gpus;
    resized = resized || w.gpus != d.windows.front().gpus;
    if (w.start < kNow + Hours{10} && w.end > kNow + Hours{4}) EXPECT_LE(w.gpus, 16);
  }
  EXPECT_TRUE(resized || d.windows.front().gpus != 16) << d.explanation;
}

TEST(ElasticPlan, NeverWiderThanTheFreeCapacity) {
  std::vector<Region> regions = {region("A", 8, series(48, 400, {{0, 4, 100}}))};
  CapacityLedger planned;
  planned.reserve("A", kNow, kNow + Hours{48}, 5);
  Job job = elastic_job(2, 1, 8, 6, 24, false);
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible) << d.explanation;
  for (const auto& w : d.windows) EXPECT_LE(w.gpus, 3);
}

TEST(ElasticPlan, ChangesAtMostOncePerHoldAndTheOverheadsArePaidInWork) {
  std::vector<double> a, b;
  for (int h = 0; h < 48; ++h) {
    a.push_back(300 + 250 * std::sin(h * 0.7));
    b.push_back(300 + 250 * std::cos(h * 0.45));
  }
  std::vector<Region> regions = {region("A", 6, a), region("B", 6, b)};
  CapacityLedger planned;
  Job job = elastic_job(4, 2, 6, 10, 30, true);
  job.resume_overhead = std::chrono::minutes{10};
  job.checkpoint_gb = 90;   // 72 s at 1.25 GB/s
  auto o = opts();
  auto d = place(job, regions, planned, kNow, o);
  ASSERT_TRUE(d.feasible) << d.explanation;
  for (size_t i = 0; i + 1 < d.windows.size(); ++i) {
    EXPECT_GE(d.windows[i + 1].start - d.windows[i].start, o.elastic.min_hold) << i;
    EXPECT_EQ((d.windows[i].start - kNow) % o.elastic.min_hold, Seconds{0}) << "window starts on a block boundary";
  }
  EXPECT_GE(work_done(job, d, o.elastic), 10.0 - 1e-6);
  EXPECT_LE(work_done(job, d, o.elastic), 10.0 + 2.0 / 60) << "the last window ends when the work is done";
  EXPECT_EQ(d.changes.size(), d.windows.size() - 1);
  EXPECT_LE(d.end, job.deadline);
}

TEST(ElasticPlan, ANonElasticJobKeepsPlainWindows) {
  std::vector<Region> regions = {region("A", 8, series(48, 400, {{0, 4, 100}}))};
  CapacityLedger planned;
  Job job = elastic_job(4, 0, 0, 3, 12, false);
  ASSERT_FALSE(job.elastic());
  auto d = place(job, regions, planned, kNow, opts());
  ASSERT_TRUE(d.feasible);
  ASSERT_EQ(d.windows.size(), 1u);
  EXPECT_TRUE(d.windows[0].region.empty());
  EXPECT_EQ(d.windows[0].gpus, 0);
  EXPECT_TRUE(d.changes.empty());
}

TEST(ElasticPlan, CommittedWindowsReserveTheirOwnRegionAndWidth) {
  std::vector<Region> regions = {region("A", 2, series(48, 900, {{0, 2, 100}, {2, 4, 300}})),
                                 region("B", 2, series(48, 900, {{4, 6, 100}}))};
  CapacityLedger planned;
  planned.reserve("A", kNow + Hours{2}, kNow + Hours{4}, 1);
  std::vector<Job> jobs = {elastic_job(2, 1, 2, 5, 6, true)};
  jobs[0].duration -= Seconds{60};
  auto ds = place_all(jobs, regions, planned, kNow, opts());
  ASSERT_TRUE(ds[0].feasible);
  EXPECT_EQ(planned.used("A", kNow), 2);
  EXPECT_EQ(planned.used("A", kNow + Hours{2}), 2);
  EXPECT_EQ(planned.used("B", kNow + Hours{4}), 2);
  EXPECT_EQ(planned.used("B", kNow), 0);
  planned.reserve(ds[0].region, ds[0].windows, -jobs[0].gpus);
  EXPECT_EQ(planned.used("A", kNow), 0);
  EXPECT_EQ(planned.used("A", kNow + Hours{2}), 1);
  EXPECT_EQ(planned.used("B", kNow + Hours{4}), 0);
}

TEST(ElasticPlan, TheSimulatorCountsEachWindowInItsRegionAndEachMove) {
  SimConfig c;
  c.regions = {{"A", 4, 1.0, plain()}, {"B", 4, 1.0, plain()}};
  c.actual["A"] = IntensitySeries("A", kNow, Hours{1}, series(24, 200, {}));
  c.actual["B"] = IntensitySeries("B", kNow, Hours{1}, series(24, 50, {}));
  Job job = elastic_job(2, 1, 2, 3, 24, true);
  job.checkpoint_gb = 100;
  JobOutcome o;
  o.job_id = job.id;
  o.region = "A";
  o.windows = {Window(kNow, kNow + Hours{1}, "A", 2), Window(kNow + Hours{1}, kNow + Hours{3}, "B", 1)};
  account_placement(c, job, o);
  double net = 100 * c.placement.elastic.network_kwh_per_gb * (200 + 50) / 2;
  EXPECT_NEAR(o.grams, 2 * 200 + 1 * 2 * 50 + net, 1e-6);
}

TEST(ElasticPlan, TheSimulatorRefusesAnInconsistentElasticJob) {
  SimConfig c;
  c.regions = {{"A", 4, 1.0, plain()}};
  c.actual["A"] = IntensitySeries("A", kNow, Hours{1}, series(24, 200, {}));
  Job job = elastic_job(2, 3, 4, 3, 24, false);
  try {
    simulate({job}, c, SimPolicy::kSpatioTemporal);
    FAIL() << "accepted min_gpus > gpus";
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find("job e needs 1 <= min_gpus <= gpus <= max_gpus"), std::string::npos) << e.what();
  }
  job = elastic_job(2, 1, 4, 3, 24, false);
  job.scaling = {{2, 3.0}, {4, 1.0}};
  EXPECT_THROW(simulate({job}, c, SimPolicy::kSpatioTemporal), CarbonError);
}

struct SpeedCase {
  const char* name;
  std::vector<ScalingPoint> curve;
  int gpus, width;
  double speed;           // NaN: throws
  const char* problem;    // "" when valid
};
void PrintTo(const SpeedCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }
class SpeedTable : public ::testing::TestWithParam<SpeedCase> {};

TEST_P(SpeedTable, SpeedRelativeToTheRequestedWidth) {
  const auto& c = GetParam();
  Job j;
  j.id = "j";
  j.gpus = c.gpus;
  j.scaling = c.curve;
  if (*c.problem == '\0') EXPECT_EQ(scaling_problem(c.curve), "");
  else EXPECT_NE(scaling_problem(c.curve).find(c.problem), std::string::npos) << scaling_problem(c.curve);
  if (std::isnan(c.speed)) EXPECT_THROW(j.speed(c.width), CarbonError);
  else EXPECT_NEAR(j.speed(c.width), c.speed, 1e-12);
}

const double kThrows = std::nan("");
INSTANTIATE_TEST_SUITE_P(
    Cases, SpeedTable,
    ::testing::Values(SpeedCase{"no curve is linear", {}, 4, 8, 2.0, ""},
                      SpeedCase{"between two points is linear", {{2, 2.0}, {4, 3.0}}, 2, 3, 1.25, ""},
                      SpeedCase{"beyond the last point is proportional", {{2, 2.0}, {4, 3.0}}, 4, 8, 2.0, ""},
                      SpeedCase{"below the first point is proportional", {{2, 2.0}, {4, 3.0}}, 4, 1, 1.0 / 3.0, ""},
                      SpeedCase{"a falling curve is refused", {{2, 3.0}, {4, 2.0}}, 2, 2, kThrows, "falls"},
                      SpeedCase{"two points at one width are refused", {{2, 3.0}, {2, 4.0}}, 2, 2, kThrows, "two scaling points"},
                      SpeedCase{"a zero speed is refused", {{2, 0.0}}, 2, 2, kThrows, "must be > 0"},
                      SpeedCase{"width zero throws", {}, 2, 0, kThrows, ""}),
    [](const auto& info) {
      std::string s = info.param.name;
      for (auto& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return s;
    });

}  // namespace
}  // namespace carbon
