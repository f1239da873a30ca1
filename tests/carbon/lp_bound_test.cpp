// LP lower bound: hand optima, brute-force integral optima, a bound below
// every simulated policy, capacity that binds, blocks, and clear errors.
#include "carbon/catalog.h"
#include "carbon/error.h"
#include "carbon/lp_bound.h"
#include "carbon/simulator.h"
#include "carbon/trace.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

namespace carbon {
namespace {

const Time kT0 = parse_time("2023-05-01T00:00Z");

// 1 kW per GPU at any load, PUE 1, nothing embodied: a GPU-hour costs the
// hour's intensity in grams.
HardwareProfile kilowatt_gpu() {
  HardwareProfile hw;
  hw.name = "test-1kw";
  hw.resource = "GPU";
  hw.resources_per_server = 1;
  hw.resource_tdp_w = 1000;
  hw.resource_idle_w = 1000;
  hw.lifetime_years = 1;
  return hw;
}

struct TinyRegion {
  std::string zone;
  int capacity;
  std::vector<double> intensity;   // one value per hour from kT0
};

SimConfig tiny_world(const std::vector<TinyRegion>& regions) {
  SimConfig c;
  for (const auto& r : regions) {
    c.regions.push_back({r.zone, r.capacity, 1.0, kilowatt_gpu()});
    c.actual[r.zone] = IntensitySeries(r.zone, kT0, Hours{1}, r.intensity);
  }
  return c;
}

// A job of `gpus` GPUs and `hours` hours, submitted `submit_min` minutes
// after kT0, due `deadline_h` hours after kT0.
Job job(std::string id, int gpus, double hours, int submit_min, int deadline_h, std::string home = "A") {
  Job j;
  j.id = std::move(id);
  j.gpus = gpus;
  j.duration = Seconds{static_cast<long>(std::llround(hours * 3600))};
  j.submit = kT0 + std::chrono::minutes{submit_min};
  j.deadline = kT0 + Hours{deadline_h};
  j.home_region = std::move(home);
  return j;
}

double bound(const std::vector<Job>& jobs, const SimConfig& c, LpSolver solver = LpSolver::kClp) {
  LpBoundOptions o;
  o.solver = solver;
  return lp_bound(jobs, c, o).grams;
}

struct HandCase {
  const char* name;
  std::vector<TinyRegion> regions;
  std::vector<Job> jobs;
  double grams;   // the optimum by hand
};

void PrintTo(const HandCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LpBoundHandOptimum : public ::testing::TestWithParam<HandCase> {};

// CLP (the bound's solver) and GLPK's two (the independent check).
TEST_P(LpBoundHandOptimum, EverySolverFindsIt) {
  const auto& c = GetParam();
  SimConfig w = tiny_world(c.regions);
  for (auto solver : {LpSolver::kClp, LpSolver::kInterior, LpSolver::kSimplex}) {
    LpBoundOptions o;
    o.solver = solver;
    LpBound b = lp_bound(c.jobs, w, o);
    EXPECT_NEAR(b.grams, c.grams, 1e-6 * c.grams);
    EXPECT_NEAR(b.lp_grams, c.grams, 1e-6 * c.grams);
    EXPECT_EQ(b.jobs, static_cast<int>(c.jobs.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LpBoundHandOptimum,
    ::testing::Values(
        HandCase{"one job takes the cleanest hour of each region",
                 {{"A", 1, {5, 1, 9, 9}}, {"B", 1, {9, 9, 2, 9}}},
                 {job("j1", 1, 2, 0, 4)},
                 1 + 2},
        HandCase{"capacity sends the second job to the next-cleanest region-hour",
                 {{"A", 1, {1, 5, 5, 5}}, {"B", 1, {2, 6, 6, 6}}},
                 {job("j1", 1, 1, 0, 4), job("j2", 1, 1, 0, 4)},
                 1 + 2},
        HandCase{"a job never runs faster than its width", {{"A", 8, {1, 3, 9}}}, {job("j1", 2, 2, 0, 3)}, 2 * (1 + 3)},
        HandCase{"a job wider than a region's capacity never runs there",
                 {{"A", 2, {1, 1, 1}}, {"B", 8, {7, 7, 7}}},
                 {job("j1", 4, 1, 0, 3)},
                 4 * 7},
        HandCase{"a job submitted at half past may use half of that hour",
                 {{"A", 1, {1, 5, 9}}},
                 {job("j1", 1, 1, 30, 2)},
                 0.5 * 1 + 0.5 * 5},
        HandCase{"the deadline cuts off the cleanest hour", {{"A", 1, {5, 6, 1}}}, {job("j1", 1, 1, 0, 2)}, 5},
        HandCase{"a region without intensity in an hour is closed then",
                 {{"A", 4, {1}}, {"B", 4, {8, 8, 8}}},
                 {job("j1", 1, 2, 0, 3)},
                 1 + 8}),
    [](const ::testing::TestParamInfo<HandCase>& info) { return gstest::test_name(info.param.name); });

// Elastic jobs: a width in [min, max] on a scaling curve.
Job elastic(Job j, int min_gpus, int max_gpus, std::vector<ScalingPoint> curve = {}) {
  j.min_gpus = min_gpus;
  j.max_gpus = max_gpus;
  j.scaling = std::move(curve);
  return j;
}

INSTANTIATE_TEST_SUITE_P(
    Elastic, LpBoundHandOptimum,
    ::testing::Values(
        HandCase{"a linear elastic job does all its work at its widest in the cleanest hour",
                 {{"A", 4, {1, 5, 9}}},
                 {elastic(job("j1", 2, 2, 0, 3), 1, 4)},
                 4 * 1},
        HandCase{"an elastic job is capped by its widest speed in every hour",
                 {{"A", 8, {1, 5, 9}}},
                 {elastic(job("j1", 2, 4, 0, 3), 1, 4)},
                 4 * 1 + 4 * 5},
        HandCase{"on a sublinear curve an hour's rate costs GPUs along the convex hull of the widths",
                 {{"A", 8, {1, 5, 9}}},
                 // Hull of (0,0), (0.6,1), (1,2), (1.1,3), (1.2,4): GPUs per work 1.67, 2.5, 10, 10.
                 // Hour 0 up to rate 1 (2 GPU-hours at 1 g); the last 0.2 h of work in hour 1
                 // on the cheapest segment (0.2 / 0.6 GPU-hours at 5 g), not at 10 GPUs per work.
                 {elastic(job("j1", 2, 1.2, 0, 3), 1, 4, {{1, 0.6}, {2, 1.0}, {4, 1.2}})},
                 2 * 1 + 0.2 / 0.6 * 5},
        HandCase{"a region smaller than the requested width serves a job that may shrink",
                 {{"A", 1, {1, 1, 1}}, {"B", 8, {7, 7, 7}}},
                 {elastic(job("j1", 4, 1, 0, 3), 1, 4)},
                 3 * 1 + 1 * 7}),   // A: 3 GPU-hours (0.75 h of work); B: the last 0.25 h, 1 GPU-hour
    [](const ::testing::TestParamInfo<HandCase>& info) { return gstest::test_name(info.param.name); });

// Brute force over integral schedules: every job runs whole hours at full
// width, any region per hour, within its window and each region's capacity.
double brute_force(const std::vector<Job>& jobs, const SimConfig& c, int hours) {
  const int R = static_cast<int>(c.regions.size());
  auto grams = [&](int r, int h) { return c.actual.at(c.regions[r].zone)[static_cast<size_t>(h)]; };
  // Every job's options: a region (or -1: idle) per hour.
  std::vector<std::vector<std::vector<int>>> options(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const int d = static_cast<int>(jobs[j].duration / Hours{1});
    const int from = static_cast<int>((jobs[j].submit - kT0) / Hours{1});
    const int to = static_cast<int>((jobs[j].deadline - kT0) / Hours{1});
    std::vector<int> plan(hours, -1);
    std::function<void(int, int)> rec = [&](int h, int left) {
      if (h == hours) {
        if (left == 0) options[j].push_back(plan);
        return;
      }
      plan[h] = -1;
      rec(h + 1, left);
      if (left > 0 && h >= from && h < to)
        for (int r = 0; r < R; ++r) {
          plan[h] = r;
          rec(h + 1, left - 1);
        }
      plan[h] = -1;
    };
    rec(0, d);
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> used(static_cast<size_t>(R * hours), 0);
  std::function<void(size_t, double)> rec = [&](size_t j, double g) {
    if (g >= best) return;
    if (j == jobs.size()) {
      best = g;
      return;
    }
    for (const auto& plan : options[j]) {
      bool fits = true;
      double add = 0;
      for (int h = 0; h < hours; ++h)
        if (plan[h] >= 0) {
          fits &= used[plan[h] * hours + h] + jobs[j].gpus <= c.regions[plan[h]].capacity;
          add += jobs[j].gpus * grams(plan[h], h);
        }
      if (!fits) continue;
      for (int h = 0; h < hours; ++h)
        if (plan[h] >= 0) used[plan[h] * hours + h] += jobs[j].gpus;
      rec(j + 1, g + add);
      for (int h = 0; h < hours; ++h)
        if (plan[h] >= 0) used[plan[h] * hours + h] -= jobs[j].gpus;
    }
  };
  rec(0, 0);
  return best;
}

struct BruteCase {
  const char* name;
  std::vector<int> gpu_choices;
  bool integral_is_fractional_optimal;
};

void PrintTo(const BruteCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LpBoundBruteForce : public ::testing::TestWithParam<BruteCase> {};

// Twelve random instances of two regions, four hours and two jobs.
TEST_P(LpBoundBruteForce, TwoRegionsFourHoursTwoJobs) {
  const auto& c = GetParam();
  std::mt19937 rng(7);
  int compared = 0;
  for (int instance = 0; instance < 12; ++instance) {
    auto u = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<TinyRegion> regions{{"A", u(1, 2), {}}, {"B", u(1, 3), {}}};
    for (auto& r : regions)
      for (int h = 0; h < 4; ++h) r.intensity.push_back(u(1, 20));
    SimConfig w = tiny_world(regions);
    std::vector<Job> jobs;
    for (int j = 0; j < 2; ++j) {
      int from = u(0, 2);
      int to = u(from + 1, 4);
      int d = u(1, to - from);
      jobs.push_back(job("j" + std::to_string(j), c.gpu_choices[u(0, static_cast<int>(c.gpu_choices.size()) - 1)], d,
                         from * 60, to));
    }
    double exact = brute_force(jobs, w, 4);
    if (std::isinf(exact)) continue;   // no integral schedule fits
    ++compared;
    double b = bound(jobs, w, LpSolver::kSimplex);
    double ipm = bound(jobs, w, LpSolver::kInterior);
    double clp = bound(jobs, w, LpSolver::kClp);
    EXPECT_NEAR(ipm, b, 1e-6 * b) << "#" << instance;
    EXPECT_NEAR(clp, b, 1e-6 * b) << "#" << instance;
    if (c.integral_is_fractional_optimal)
      EXPECT_NEAR(b, exact, 1e-6 * exact) << "#" << instance;
    else
      EXPECT_LE(b, exact * (1 + 1e-9)) << "#" << instance;
  }
  EXPECT_GE(compared, 8);
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LpBoundBruteForce,
    ::testing::Values(
        // One GPU per job: the LP is a network flow with integral data, so an
        // integral schedule is optimal and the bound is exact.
        BruteCase{"with one-GPU jobs the bound equals the best integral schedule", {1}, true},
        // Wider jobs may run part of an hour in the LP: the bound can only be lower.
        BruteCase{"with jobs of one or two GPUs the bound is at most the best integral schedule", {1, 2}, false}),
    [](const ::testing::TestParamInfo<BruteCase>& info) { return gstest::test_name(info.param.name); });

TEST(LpBound, CapacityBindsUnlikeTheOracle) {
  // Both jobs want A's only GPU in hour 0; the capacity-relaxed oracle gives
  // it to both.
  SimConfig w = tiny_world({{"A", 1, {1, 5, 5, 5}}, {"B", 1, {2, 6, 6, 6}}});
  std::vector<Job> jobs{job("j1", 1, 1, 0, 4), job("j2", 1, 1, 0, 4)};
  double oracle = simulate(jobs, w, SimPolicy::kOracle).total_grams;
  EXPECT_NEAR(oracle, 1 + 1, 1e-9);
  EXPECT_NEAR(bound(jobs, w), 1 + 2, 1e-6);
  EXPECT_GT(bound(jobs, w), oracle);
}

struct World {
  SimConfig cfg;
  std::vector<Job> trace;
};

// Four weeks of real data, five zones, a generated trace.
World world(int capacity) {
  static const Catalog cat = Catalog::load(builtin_data_dir(), {"GB", "DE", "CA-ON", "KR", "US-CAL-CISO"});
  World w;
  for (const auto& z : cat.ids()) {
    w.cfg.regions.push_back({z, capacity, 1.2, hardware_profile("h100-sxm-8")});
    w.cfg.actual[z] = cat.series(z);
  }
  TraceOptions o;
  o.seed = 3;
  o.from = parse_time("2023-05-01T00:00Z");
  o.to = parse_time("2023-05-29T00:00Z");
  o.regions = cat.ids();
  o.jobs_per_workday = 6;
  o.max_hours = 48;
  w.trace = generate_trace(o);
  return w;
}

TEST(LpBound, BelowEverySimulatedPolicyThatMeetsItsDeadlines) {
  World w = world(192);
  LpBound b = lp_bound(w.trace, w.cfg);
  EXPECT_EQ(b.jobs, static_cast<int>(w.trace.size()));
  EXPECT_NEAR(b.grams, b.lp_grams, 1e-6 * b.lp_grams);   // Lagrangian at the LP's duals = the LP
  auto results = compare_policies(
      w.trace, w.cfg, {SimPolicy::kFifo, SimPolicy::kTemporal, SimPolicy::kSpatial, SimPolicy::kSpatioTemporal});
  int checked = 0;
  for (const auto& r : results) {
    if (r.deadline_misses > 0) continue;   // outside the set the bound covers
    EXPECT_LE(b.grams, r.total_grams) << sim_policy_name(r.policy);
    ++checked;
  }
  EXPECT_GE(checked, 2);
  EXPECT_EQ(results[3].policy, SimPolicy::kSpatioTemporal);
  EXPECT_EQ(results[3].deadline_misses, 0);
}

TEST(LpBound, BelowTheElasticPolicyAndBelowTheFixedWidthBound) {
  World w = world(192);
  auto fixed = lp_bound(w.trace, w.cfg).grams;
  for (auto& j : w.trace) {
    make_elastic(j, 8);
    j.migratable = true;
  }
  LpBound b = lp_bound(w.trace, w.cfg);
  EXPECT_NEAR(b.grams, b.lp_grams, 1e-6 * b.lp_grams);
  EXPECT_LT(b.grams, fixed) << "more freedom, a lower bound";
  auto r = simulate(w.trace, w.cfg, SimPolicy::kSpatioTemporal);
  ASSERT_EQ(r.deadline_misses, 0);
  EXPECT_LE(b.grams, r.total_grams);
}

// CLP solves every LP of the bench; GLPK, an independent solver, must find
// the same optimum on four weeks of real data, fixed-width and elastic.
TEST(LpBound, ClpAgreesWithGlpkOnFourWeeksOfRealData) {
  World w = world(96);
  for (bool elastic : {false, true}) {
    if (elastic)
      for (auto& j : w.trace) {
        make_elastic(j, 8);
        j.migratable = true;
      }
    LpBoundOptions o;
    o.solver = LpSolver::kClp;
    const LpBound clp = lp_bound(w.trace, w.cfg, o);
    o.solver = LpSolver::kInterior;
    const LpBound glpk = lp_bound(w.trace, w.cfg, o);
    EXPECT_NEAR(clp.lp_grams, glpk.lp_grams, 1e-6 * glpk.lp_grams) << (elastic ? "elastic" : "fixed width");
    EXPECT_NEAR(clp.grams, glpk.grams, 1e-6 * glpk.grams) << (elastic ? "elastic" : "fixed width");
    EXPECT_NEAR(clp.grams, clp.lp_grams, 1e-6 * clp.lp_grams) << "the Lagrangian at CLP's duals is its optimum";
  }
}

TEST(LpBound, TighterCapacityRaisesTheBound) {
  World tight = world(96), ample = world(100000);
  double t = lp_bound(tight.trace, tight.cfg).grams;
  double a = lp_bound(ample.trace, ample.cfg).grams;
  EXPECT_GT(t, a * 1.01);
  // Without binding capacity the bound is at most the oracle (which starts
  // at the next whole hour and ends at the last whole hour before the deadline).
  EXPECT_LE(a, simulate(ample.trace, ample.cfg, SimPolicy::kOracle).total_grams * (1 + 1e-9));
}

struct BlockCase {
  const char* name;
  int block_hours, margin, threads;
  double within;   // relative gap allowed below the full LP
};

void PrintTo(const BlockCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LpBoundBlocks : public ::testing::TestWithParam<BlockCase> {};

TEST_P(LpBoundBlocks, StayBelowTheFullLpAndCloseToIt) {
  const auto& c = GetParam();
  static const World w = world(96);
  static const LpBound full = lp_bound(w.trace, w.cfg);
  LpBoundOptions o;
  o.block_hours = c.block_hours;
  o.block_margin_hours = c.margin;
  o.threads = c.threads;
  LpBound b = lp_bound(w.trace, w.cfg, o);
  EXPECT_TRUE(std::isnan(b.lp_grams));
  EXPECT_GT(b.lps, 1);
  EXPECT_LE(b.grams, full.grams * (1 + 1e-7));
  EXPECT_GE(b.grams, full.grams * (1 - c.within));
  if (c.threads > 1) {
    o.threads = 1;
    EXPECT_NEAR(lp_bound(w.trace, w.cfg, o).grams, b.grams, 1e-9 * b.grams) << "threads change nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LpBoundBlocks,
    ::testing::Values(BlockCase{"weekly blocks without margin are within five percent", 168, 0, 1, 0.05},
                      BlockCase{"a two-day margin brings weekly blocks within two percent", 168, 48, 1, 0.02},
                      BlockCase{"two threads give the same bound as one", 168, 48, 2, 0.02},
                      BlockCase{"even daily blocks stay a valid bound", 24, 0, 2, 0.25}),
    [](const ::testing::TestParamInfo<BlockCase>& info) { return gstest::test_name(info.param.name); });

// merge_alike_jobs: one LP row per class of alike jobs (same kind, rate
// segments and hours). Its LP relaxes the exact one; the bound is still the
// Lagrangian over the single jobs at its prices, so it lies between the
// merged LP's optimum and the exact bound.
struct MergeCase {
  const char* name;
  std::function<World()> make;
  bool elastic;
  int max_rows_per_10_jobs;   // job rows of the merged LPs per 10 jobs, at most
  double within;              // relative gap allowed below the exact bound
};

void PrintTo(const MergeCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LpBoundMerge : public ::testing::TestWithParam<MergeCase> {};

TEST_P(LpBoundMerge, StaysBetweenTheMergedLpAndTheExactBound) {
  const auto& c = GetParam();
  World w = c.make();
  if (c.elastic)
    for (auto& j : w.trace) {
      make_elastic(j, 8);
      j.migratable = true;
    }
  const LpBound exact = lp_bound(w.trace, w.cfg);
  LpBoundOptions o;
  o.merge_alike_jobs = true;
  const LpBound merged = lp_bound(w.trace, w.cfg, o);
  EXPECT_EQ(exact.lp_job_rows, static_cast<int>(w.trace.size()));
  EXPECT_LE(merged.lp_job_rows * 10, c.max_rows_per_10_jobs * static_cast<int>(w.trace.size()));
  EXPECT_EQ(merged.jobs, exact.jobs);
  EXPECT_LE(merged.grams, exact.grams * (1 + 1e-7)) << "a relaxation: never above the exact bound";
  EXPECT_GE(merged.grams, merged.lp_grams * (1 - 1e-7)) << "the single jobs' Lagrangian: at least the merged LP";
  EXPECT_GE(merged.grams, exact.grams * (1 - c.within));
}

// Two weeks of a busy trace (40 jobs a workday) on five zones.
World busy_world() {
  World w = world(512);
  TraceOptions o;
  o.seed = 5;
  o.from = parse_time("2023-05-01T00:00Z");
  o.to = parse_time("2023-05-15T00:00Z");
  for (const auto& r : w.cfg.regions) o.regions.push_back(r.zone);
  o.jobs_per_workday = 40;
  o.max_hours = 48;
  w.trace = generate_trace(o);
  return w;
}

// Identical jobs: merging them loses nothing.
World twins_world() {
  World w;
  w.cfg = tiny_world({{"A", 2, {100, 10, 10, 100, 100}}, {"B", 1, {50, 50, 50, 50, 50}}});
  w.trace = {job("t1", 1, 2, 0, 5), job("t2", 1, 2, 0, 5), job("t3", 1, 2, 0, 5)};
  return w;
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LpBoundMerge,
    ::testing::Values(
        MergeCase{"identical jobs merge into one row and lose nothing", twins_world, false, 4, 1e-7},
        MergeCase{"a busy trace of fixed-width jobs merges to at most eight rows for ten jobs within half a percent", busy_world,
                  false, 8, 0.005},
        MergeCase{"a busy trace of elastic jobs merges to at most eight rows for ten jobs within half a percent", busy_world,
                  true, 8, 0.005}),
    [](const ::testing::TestParamInfo<MergeCase>& info) { return gstest::test_name(info.param.name); });

struct ErrorCase {
  const char* name;
  std::vector<Job> jobs;
  std::vector<std::string> message;   // substrings of what()
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LpBoundError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(LpBoundError, NamesTheJobs) {
  const auto& c = GetParam();
  SimConfig w = tiny_world({{"A", 2, {1, 1, 1, 1}}, {"B", 1, {2, 2, 2, 2}}});
  try {
    lp_bound(c.jobs, w);
    ADD_FAILURE() << "no error";
  } catch (const CarbonError& e) {
    for (const auto& m : c.message) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LpBoundError,
    ::testing::Values(
        ErrorCase{"a deadline shorter than the duration names the job",
                  {job("ok", 1, 1, 0, 4), job("late", 1, 3, 0, 2)},
                  {"1 job cannot finish by the deadline even alone", "job late needs 3.00 h", "only 2.00 h"}},
        ErrorCase{"a job wider than every region names the job",
                  {job("wide", 4, 1, 0, 4)},
                  {"job wide needs 4 GPUs at once"}},
        ErrorCase{"jobs that cannot all fit name the jobs and the interval",
                  {job("x", 2, 2, 0, 2), job("y", 2, 2, 0, 2)},
                  {"no fractional schedule", "x, y need 8.00 GPU-hours, their regions offer 4.00"}},
        ErrorCase{"an unknown region is named", {job("lost", 1, 1, 0, 4, "XX")}, {"job lost names region 'XX'"}}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return gstest::test_name(info.param.name); });

TEST(LpBound, ASpentTimeBudgetIsAClearError) {
  SimConfig w = tiny_world({{"A", 2, {1, 1, 1, 1}}});
  LpBoundOptions o;
  o.time_limit_s = 1e-9;   // spent before the first LP starts
  try {
    lp_bound({job("j1", 1, 1, 0, 4)}, w, o);
    ADD_FAILURE() << "no error";
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find("time limit"), std::string::npos) << e.what();
  }
}

TEST(LpBound, ASpentBudgetPricedAtZeroIsALooserBoundAndARow) {
  // Two 1-GPU jobs of 1 h want the one clean hour of a 1-GPU region.
  SimConfig w = tiny_world({{"A", 1, {100, 10, 100, 100}}});
  const std::vector<Job> jobs{job("j1", 1, 1, 0, 4), job("j2", 1, 1, 0, 4)};
  const LpBound solved = lp_bound(jobs, w);
  EXPECT_TRUE(solved.over_budget.empty());
  LpBoundOptions o;
  o.time_limit_s = 1e-9;   // spent before the first LP starts
  o.on_budget_out = LpBudgetOut::kPriceAtZero;
  const LpBound loose = lp_bound(jobs, w, o);
  ASSERT_EQ(loose.over_budget.size(), 1u);
  EXPECT_NE(loose.over_budget[0].find("time limit"), std::string::npos) << loose.over_budget[0];
  EXPECT_NE(loose.over_budget[0].find("2 jobs"), std::string::npos) << loose.over_budget[0];
  EXPECT_EQ(loose.lps, 0);
  // At price 0 each job takes the clean hour alone: the sum of the jobs'
  // own bounds, below the bound that prices the contention.
  const double alone = lp_bound({jobs[0]}, w).grams + lp_bound({jobs[1]}, w).grams;
  EXPECT_NEAR(loose.grams, alone, 1e-6 * alone);
  EXPECT_LT(loose.grams, solved.grams - 1e-6 * solved.grams);
}

TEST(LpBound, SkippedInfeasibleJobsAreListedAndLeftOut) {
  SimConfig w = tiny_world({{"A", 2, {1, 1, 1, 1}}});
  LpBoundOptions o;
  o.skip_infeasible_jobs = true;
  LpBound b = lp_bound({job("ok", 1, 1, 0, 4), job("late", 1, 3, 0, 2)}, w, o);
  EXPECT_EQ(b.jobs, 1);
  EXPECT_EQ(b.infeasible_jobs, std::vector<std::string>{"late"});
  EXPECT_NEAR(b.grams, 1, 1e-6);
}

}  // namespace
}  // namespace carbon
