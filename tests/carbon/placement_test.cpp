// Placement: table-driven cases keyed by a sentence, plus pass-level checks.
#include "carbon/error.h"
#include "carbon/placement.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace carbon {
namespace {

const Time kNow = parse_time("2023-06-05T00:00Z");  // a Monday

// 1 kW per GPU, no idle power, no overhead, no embodied: grams = GPUs * sum(I).
HardwareProfile plain() { return HardwareProfile{"plain", "GPU", 8, 1000, 0, 0, 0, 1}; }

struct RegionSpec {
  std::string name;
  int capacity;
  double base;                                  // intensity everywhere...
  std::vector<std::tuple<int, int, double>> dips;   // ...except [from, to) hours -> value
};

Region make_region(const RegionSpec& r, int hours = 48) {
  std::vector<double> v(static_cast<size_t>(hours), r.base);
  for (auto [a, b, x] : r.dips)
    for (int h = a; h < b; ++h) v[h] = x;
  Region g;
  g.name = r.name;
  g.capacity = r.capacity;
  g.pue = 1.0;
  g.hardware = plain();
  g.forecast = IntensitySeries(r.name, kNow, Hours{1}, v);
  return g;
}

struct Reservation {
  std::string region;
  int from_h, to_h, gpus;
};

struct PlacementCase {
  const char* name;
  std::vector<RegionSpec> regions;
  int gpus;
  int hours;
  int deadline_h;                 // from now
  bool interruptible;
  std::vector<std::string> allowed;
  std::vector<Reservation> planned;
  Policy policy;
  // expectations
  bool feasible;
  std::string region;
  std::vector<std::pair<int, int>> windows;   // hour offsets
  std::vector<std::string> reason_has;
};

void PrintTo(const PlacementCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class PlacementTable : public ::testing::TestWithParam<PlacementCase> {};

TEST_P(PlacementTable, ChoosesTheExpectedPlacement) {
  const auto& c = GetParam();
  std::vector<Region> regions;
  for (const auto& r : c.regions) regions.push_back(make_region(r));
  CapacityLedger ledger;
  for (const auto& p : c.planned) ledger.reserve(p.region, kNow + Hours{p.from_h}, kNow + Hours{p.to_h}, p.gpus);
  Job job;
  job.id = "job";
  job.gpus = c.gpus;
  job.duration = Hours{c.hours};
  job.submit = kNow;
  job.deadline = kNow + Hours{c.deadline_h};
  job.home_region = "A";
  job.interruptible = c.interruptible;
  job.resume_overhead = Seconds{0};
  job.allowed_regions = c.allowed;
  PlacementOptions opt;
  opt.policy = c.policy;
  opt.max_lookahead = Hours{48};
  auto d = place(job, regions, ledger, kNow, opt);
  ASSERT_EQ(d.feasible, c.feasible) << d.explanation;
  if (!c.feasible) {
    for (const auto& s : c.reason_has) EXPECT_NE(d.reason.find(s), std::string::npos) << "reason: " << d.reason;
    return;
  }
  EXPECT_EQ(d.region, c.region) << d.explanation;
  std::vector<std::pair<int, int>> got;
  for (const auto& w : d.windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Hours{1}), static_cast<int>((w.end - kNow) / Hours{1}));
  EXPECT_EQ(got, c.windows) << d.explanation;
  EXPECT_TRUE(d.deadline_met || c.policy == Policy::kRunNowHome || c.policy == Policy::kSpatial);
  EXPECT_FALSE(d.explanation.empty());
}

using P = Policy;
const RegionSpec kDirtyHome{"A", 64, 300, {{10, 14, 50}}};

INSTANTIATE_TEST_SUITE_P(
    Carbon, PlacementTable,
    ::testing::Values(
        PlacementCase{"a deadline that leaves no slack forces a run now at home",
                      {kDirtyHome, {"B", 64, 500, {}}}, 8, 4, 4, false, {}, {}, P::kSpatioTemporal,
                      true, "A", {{0, 4}}, {}},
        PlacementCase{"with slack the job waits for the clean hours at home",
                      {kDirtyHome, {"B", 64, 500, {}}}, 8, 4, 24, false, {}, {}, P::kSpatioTemporal,
                      true, "A", {{10, 14}}, {}},
        PlacementCase{"a full best region sends the job to the next cleanest region",
                      {{"A", 64, 300, {}}, {"B", 16, 50, {}}, {"C", 16, 100, {}}}, 8, 4, 24, false, {},
                      {{"B", 0, 48, 16}}, P::kSpatioTemporal, true, "C", {{0, 4}}, {}},
        PlacementCase{"a partly full best region is used once it frees up",
                      {{"A", 64, 300, {}}, {"B", 16, 50, {}}, {"C", 16, 100, {}}}, 8, 4, 24, false, {},
                      {{"B", 0, 3, 16}}, P::kSpatioTemporal, true, "B", {{3, 7}}, {}},
        PlacementCase{"an interruptible job is split across two clean windows",
                      {{"A", 64, 400, {{2, 5, 50}, {10, 13, 60}}}}, 8, 6, 24, true, {}, {}, P::kSpatioTemporal,
                      true, "A", {{2, 5}, {10, 13}}, {}},
        PlacementCase{"a job that is not interruptible runs in one contiguous window (ties: earliest)",
                      {{"A", 64, 400, {{2, 5, 50}, {10, 13, 60}}}}, 8, 6, 24, false, {}, {}, P::kSpatioTemporal,
                      true, "A", {{0, 6}}, {}},
        PlacementCase{"no region with enough GPUs gives a clear reason",
                      {{"A", 8, 300, {}}, {"B", 8, 100, {}}}, 16, 4, 24, false, {}, {}, P::kSpatioTemporal,
                      false, "", {}, {"A: capacity 8 < 16 GPUs", "B: capacity 8 < 16 GPUs"}},
        PlacementCase{"capacity full until after the deadline names each region",
                      {{"A", 16, 300, {}}, {"B", 16, 100, {}}}, 8, 4, 12, false, {},
                      {{"A", 0, 20, 16}, {"B", 0, 20, 12}}, P::kSpatioTemporal, false, "", {},
                      {"A: not enough free capacity", "B: not enough free capacity", "finishing by"}},
        PlacementCase{"a deadline before the earliest finish is infeasible",
                      {{"A", 64, 300, {}}}, 8, 4, 2, false, {}, {}, P::kSpatioTemporal, false, "", {},
                      {"before the earliest possible finish"}},
        PlacementCase{"a region outside the allowed list is never used",
                      {{"A", 64, 300, {}}, {"B", 64, 10, {}}, {"C", 64, 100, {}}}, 8, 4, 24, false, {"A", "C"}, {},
                      P::kSpatioTemporal, true, "C", {{0, 4}}, {}},
        PlacementCase{"an unknown allowed region is reported",
                      {{"A", 8, 300, {}}}, 16, 4, 24, false, {"A", "Mars"}, {}, P::kSpatioTemporal, false, "", {},
                      {"Mars: unknown region"}},
        PlacementCase{"temporal-only waits for the clean hours at home but never leaves",
                      {kDirtyHome, {"B", 64, 10, {}}}, 8, 4, 24, false, {}, {}, P::kTemporal, true, "A", {{10, 14}}, {}},
        PlacementCase{"spatial-only runs now in the cleanest region",
                      {kDirtyHome, {"B", 64, 10, {}}, {"C", 64, 20, {}}}, 8, 4, 24, false, {}, {}, P::kSpatial, true, "B",
                      {{0, 4}}, {}},
        PlacementCase{"fifo runs now at home even when a cleaner hour is near",
                      {kDirtyHome, {"B", 64, 10, {}}}, 8, 4, 24, false, {}, {}, P::kRunNowHome, true, "A", {{0, 4}}, {}},
        PlacementCase{"a full home region delays fifo until capacity frees up",
                      {kDirtyHome}, 8, 4, 24, false, {}, {{"A", 0, 3, 60}}, P::kRunNowHome, true, "A", {{3, 7}}, {}}),
    [](const ::testing::TestParamInfo<PlacementCase>& info) { return gstest::test_name(info.param.name); });

// Region::capacity_by_hour: capacity over time (hour i after floor_hour(now);
// beyond the vector, `capacity`). Regions: A dirty home (300), B clean (50).
struct CapacityOverTimeCase {
  const char* name;
  int b_capacity;                     // B's `capacity`
  std::vector<int> b_by_hour;         // B's capacity_by_hour
  std::vector<int> a_by_hour;         // A's capacity_by_hour (A: capacity 64)
  std::vector<Reservation> planned;
  int gpus;
  Policy policy;
  bool feasible;
  std::string region;
  std::vector<std::pair<int, int>> windows;
  std::vector<std::string> reason_has;
};

void PrintTo(const CapacityOverTimeCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class CapacityOverTime : public ::testing::TestWithParam<CapacityOverTimeCase> {};

TEST_P(CapacityOverTime, PlacementFollowsTheCapacityOfEachHour) {
  const auto& c = GetParam();
  Region a = make_region({"A", 64, 300, {}});
  a.capacity_by_hour = c.a_by_hour;
  Region b = make_region({"B", c.b_capacity, 50, {}});
  b.capacity_by_hour = c.b_by_hour;
  CapacityLedger ledger;
  for (const auto& p : c.planned) ledger.reserve(p.region, kNow + Hours{p.from_h}, kNow + Hours{p.to_h}, p.gpus);
  Job job{"job", c.gpus, Hours{4}, kNow, kNow + Hours{24}, "A", {}, false};
  PlacementOptions opt;
  opt.policy = c.policy;
  opt.max_lookahead = Hours{48};
  auto d = place(job, {a, b}, ledger, kNow, opt);
  ASSERT_EQ(d.feasible, c.feasible) << d.explanation;
  if (!c.feasible) {
    for (const auto& s : c.reason_has) EXPECT_NE(d.reason.find(s), std::string::npos) << "reason: " << d.reason;
    return;
  }
  EXPECT_EQ(d.region, c.region) << d.explanation;
  std::vector<std::pair<int, int>> got;
  for (const auto& w : d.windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Hours{1}), static_cast<int>((w.end - kNow) / Hours{1}));
  EXPECT_EQ(got, c.windows) << d.explanation;
}

const std::vector<int> kZeroFor6h(6, 0);

INSTANTIATE_TEST_SUITE_P(
    Carbon, CapacityOverTime,
    ::testing::Values(
        CapacityOverTimeCase{"a clean region with no capacity for the first hours is used once it has some",
                             16, kZeroFor6h, {}, {}, 8, P::kSpatioTemporal, true, "B", {{6, 10}}, {}},
        CapacityOverTimeCase{"capacity beyond the hourly list is the region's capacity",
                             16, {8, 8, 8, 8, 8}, {}, {}, 16, P::kSpatioTemporal, true, "B", {{5, 9}}, {}},
        CapacityOverTimeCase{"a clean region with capacity only for the next hours is used now",
                             0, {16, 16, 16, 16, 16, 16}, {}, {}, 8, P::kSpatioTemporal, true, "B", {{0, 4}}, {}},
        CapacityOverTimeCase{"capacity that ends before the run is over rules the region out",
                             0, {16, 16, 16}, {}, {}, 8, P::kSpatioTemporal, true, "A", {{0, 4}}, {}},
        CapacityOverTimeCase{"a dip in capacity shorter than the run blocks every start that spans it",
                             16, {16, 16, 0, 16, 16, 16, 16, 16}, {}, {}, 8, P::kSpatioTemporal, true, "B", {{3, 7}}, {}},
        CapacityOverTimeCase{"planned jobs count against the capacity of that hour",
                             32, {16, 16, 16, 16, 16, 16}, {}, {{"B", 0, 6, 8}}, 16, P::kSpatioTemporal, true, "B",
                             {{6, 10}}, {}},
        CapacityOverTimeCase{"a region whose hourly capacity is below the job in every hour is skipped",
                             0, std::vector<int>(48, 8), {}, {}, 16, P::kSpatial, true, "A", {{0, 4}}, {}},
        CapacityOverTimeCase{"no region with enough capacity in any hour of the look-ahead names each region's largest capacity",
                             0, std::vector<int>(48, 8), std::vector<int>(48, 12), {}, 16, P::kSpatioTemporal, false, "",
                             {}, {"A: capacity 12 < 16 GPUs", "B: capacity 8 < 16 GPUs"}},
        CapacityOverTimeCase{"fifo at a home region without capacity in the first hours waits for it",
                             16, {}, {0, 0, 0}, {}, 8, P::kRunNowHome, true, "A", {{3, 7}}, {}}),
    [](const ::testing::TestParamInfo<CapacityOverTimeCase>& info) { return gstest::test_name(info.param.name); });

// duration_from_tokens: tokens / throughput, rounded up to whole seconds.
struct DurationCase {
  const char* name;
  double tokens, tokens_per_second;
  long seconds;                   // expected; -1: throws
  const char* error_has;
};

void PrintTo(const DurationCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class DurationFromTokens : public ::testing::TestWithParam<DurationCase> {};

TEST_P(DurationFromTokens, DividesAndRoundsUpOrNamesTheBadInput) {
  const auto& c = GetParam();
  if (c.seconds >= 0) {
    EXPECT_EQ(duration_from_tokens(c.tokens, c.tokens_per_second), Seconds{c.seconds});
    return;
  }
  try {
    duration_from_tokens(c.tokens, c.tokens_per_second);
    ADD_FAILURE() << "no CarbonError";
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find(c.error_has), std::string::npos) << e.what();
  }
}

const double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    Carbon, DurationFromTokens,
    ::testing::Values(DurationCase{"an exact division gives that many seconds", 3.6e9, 1e5, 36000, ""},
                      DurationCase{"a remainder rounds up to the next whole second", 1001, 10, 101, ""},
                      DurationCase{"fewer tokens than one second's worth still take one second", 1, 1e6, 1, ""},
                      DurationCase{"a fractional throughput is allowed", 10, 0.5, 20, ""},
                      DurationCase{"zero tokens are rejected", 0, 100, -1, "tokens must be > 0"},
                      DurationCase{"negative tokens are rejected", -5, 100, -1, "tokens must be > 0"},
                      DurationCase{"infinitely many tokens are rejected", kInf, 100, -1, "tokens must be > 0"},
                      DurationCase{"zero throughput is rejected", 100, 0, -1, "throughput must be > 0"},
                      DurationCase{"a NaN throughput is rejected", 100, std::nan(""), -1, "throughput must be > 0"}),
    [](const ::testing::TestParamInfo<DurationCase>& info) { return gstest::test_name(info.param.name); });

// deadline_from_max_delay: submit + duration + max_delay.
struct MaxDelayCase {
  const char* name;
  Seconds duration, max_delay;
  Seconds deadline_after_submit;  // expected; negative: throws
};

void PrintTo(const MaxDelayCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class DeadlineFromMaxDelay : public ::testing::TestWithParam<MaxDelayCase> {};

TEST_P(DeadlineFromMaxDelay, AddsTheDelayToTheEarliestFinish) {
  const auto& c = GetParam();
  Job job;
  job.submit = kNow + std::chrono::minutes{17};
  job.duration = c.duration;
  if (c.deadline_after_submit.count() < 0) {
    try {
      deadline_from_max_delay(job, c.max_delay);
      ADD_FAILURE() << "no CarbonError";
    } catch (const CarbonError& e) {
      EXPECT_NE(std::string(e.what()).find("negative delay"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_EQ(deadline_from_max_delay(job, c.max_delay), job.submit + c.deadline_after_submit);
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, DeadlineFromMaxDelay,
    ::testing::Values(MaxDelayCase{"no delay allowed means the earliest finish", Hours{5}, Seconds{0}, Hours{5}},
                      MaxDelayCase{"a day of delay is added to the run time", Hours{5}, Hours{24}, Hours{29}},
                      MaxDelayCase{"seconds are kept exactly", Seconds{3601}, Seconds{59}, Seconds{3660}},
                      MaxDelayCase{"a negative delay is rejected", Hours{5}, Seconds{-1}, Seconds{-1}}),
    [](const ::testing::TestParamInfo<MaxDelayCase>& info) { return gstest::test_name(info.param.name); });

TEST(Placement, ADeadlineFromAMaxDelayOfZeroForcesARunNow) {
  std::vector<Region> regions{make_region(kDirtyHome)};
  Job job{"j", 8, duration_from_tokens(4 * 3600.0 * 1000, 1000), kNow, {}, "A", {}, false};
  job.deadline = deadline_from_max_delay(job, Seconds{0});
  auto d = place(job, regions, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_EQ(d.start, kNow);
  EXPECT_EQ(d.end, kNow + Hours{4});
  job.deadline = deadline_from_max_delay(job, Hours{20});
  EXPECT_EQ(place(job, regions, CapacityLedger{}, kNow).start, kNow + Hours{10});   // the dip at 10-14
}

TEST(Placement, ExplanationReportsGramsAndSaving) {
  std::vector<Region> regions{make_region(kDirtyHome), make_region({"B", 64, 500, {}})};
  Job job{"j1", 8, Hours{4}, kNow, kNow + Hours{24}, "A", {}, false};
  auto d = place(job, regions, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible);
  // Run now at home: 8 kW * 4 h * 300 = 9600 g; at the dip: 8 * 4 * 50 = 1600 g.
  EXPECT_DOUBLE_EQ(d.run_now_home_grams, 9600);
  EXPECT_DOUBLE_EQ(d.expected_grams, 1600);
  EXPECT_DOUBLE_EQ(d.saving_grams, 8000);
  EXPECT_NEAR(d.saving_pct, 83.333, 0.01);
  EXPECT_NE(d.explanation.find("9.6 kg"), std::string::npos) << d.explanation;
  EXPECT_NE(d.explanation.find("1.6 kg"), std::string::npos) << d.explanation;
  EXPECT_NE(d.explanation.find("Waits 10.0 h"), std::string::npos) << d.explanation;
}

TEST(Placement, EmbodiedAndPueAreInTheExpectedGrams) {
  Region r = make_region({"A", 64, 100, {}});
  r.pue = 1.5;
  r.hardware = HardwareProfile{"e", "GPU", 8, 1000, 0, 0, 876, 1};  // 876 kg / 8760 h / 8 = 12.5 g per GPU-hour
  Job job{"j", 8, Hours{2}, kNow, kNow + Hours{10}, "A", {}, false};
  auto d = place(job, {r}, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible);
  EXPECT_DOUBLE_EQ(d.expected_operational_grams, 8 * 1.5 * 100 * 2);
  EXPECT_DOUBLE_EQ(d.expected_embodied_grams, 8 * 2 * 12.5);
}

TEST(Placement, StartInTheCurrentHourIsNowAndSpansTheNextHour) {
  Region r = make_region({"A", 8, 100, {{0, 1, 10}}});
  Time now = kNow + std::chrono::minutes{30};
  Job job{"j", 8, Hours{1}, now, now + Hours{1}, "A", {}, false};
  auto d = place(job, {r}, CapacityLedger{}, now);
  ASSERT_TRUE(d.feasible);
  EXPECT_EQ(d.start, now);
  EXPECT_EQ(d.end, now + Hours{1});
  // Half an hour at 10 and half an hour at 100, 8 kW.
  EXPECT_DOUBLE_EQ(d.expected_grams, 8 * (0.5 * 10 + 0.5 * 100));
  // The next hour is full: the run straddling it is not possible.
  CapacityLedger full;
  full.reserve("A", kNow + Hours{1}, kNow + Hours{2}, 8);
  EXPECT_FALSE(place(job, {r}, full, now).feasible);
}

TEST(Placement, ForecastShorterThanTheDeadlineIsExtendedAndSaid) {
  Region r = make_region({"A", 64, 300, {{20, 23, 50}}}, 24);
  Job job{"j", 8, Hours{3}, kNow, kNow + Hours{60}, "A", {}, false};
  PlacementOptions opt;
  auto d = place(job, {r}, CapacityLedger{}, kNow, opt);
  ASSERT_TRUE(d.feasible);
  EXPECT_EQ(d.start, kNow + Hours{20});   // the first dip wins the tie with its repetitions
  auto later = place(job, {make_region({"A", 64, 300, {{20, 23, 60}}}, 24)}, CapacityLedger{}, kNow, opt);
  EXPECT_FALSE(later.forecast_extended);
  CapacityLedger ledger;
  ledger.reserve("A", kNow + Hours{20}, kNow + Hours{23}, 64);
  auto d2 = place(job, {r}, ledger, kNow, opt);
  ASSERT_TRUE(d2.feasible);
  EXPECT_EQ(d2.start, kNow + Hours{44});   // the repeated dip, beyond the 24 h forecast
  EXPECT_TRUE(d2.forecast_extended);
  EXPECT_NE(d2.explanation.find("repeating its last 24 h"), std::string::npos);
}

// A job longer than the look-ahead: its plan may run as long as the job
// needs (the forecast extended by repeating its last 24 h), so it starts
// at once or waits for a later pass -- never "no capacity" forever. Jobs
// that fit the look-ahead are planned within it, as before.
struct LongJobCase {
  const char* name;
  int hours;                          // the job's run time (look-ahead: 12 h)
  bool interruptible;
  int busy_h;                         // region A is full for the first busy_h hours
  Policy policy;
  bool feasible;
  std::pair<int, int> span;           // first start .. last end, hours from now
  const char* reason_has;
};

void PrintTo(const LongJobCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class LongerThanTheLookahead : public ::testing::TestWithParam<LongJobCase> {};

TEST_P(LongerThanTheLookahead, APlanAsLongAsTheJobNeeds) {
  const auto& c = GetParam();
  Region a = make_region({"A", 8, 300, {{2, 4, 50}}}, 12);   // a 12 h forecast
  CapacityLedger ledger;
  if (c.busy_h > 0) ledger.reserve("A", kNow, kNow + Hours{c.busy_h}, 8);
  Region b = make_region({"B", 8, 400, {}}, 12);
  Job job{"long", 8, Hours{c.hours}, kNow, Time::max(), "A", {"A"}, c.interruptible};
  job.resume_overhead = Seconds{0};
  PlacementOptions opt;
  opt.policy = c.policy;
  opt.max_lookahead = Hours{12};
  // Alone, and in a pass with a job that needs more slots (elsewhere): the
  // same decision.
  const Decision d = place(job, {a, b}, ledger, kNow, opt);
  CapacityLedger pass_ledger = ledger;
  Job longer{"longer", 8, Hours{60}, kNow, Time::max(), "B", {"B"}, false};
  const auto both = place_all({job, longer}, {a, b}, pass_ledger, kNow, opt);
  ASSERT_EQ(d.feasible, c.feasible) << d.explanation;
  ASSERT_EQ(both[0].feasible, c.feasible) << both[0].explanation;
  if (!c.feasible) {
    EXPECT_NE(d.reason.find(c.reason_has), std::string::npos) << d.reason;
    return;
  }
  ASSERT_EQ(d.windows.size(), both[0].windows.size());
  for (size_t w = 0; w < d.windows.size(); ++w) {
    EXPECT_EQ(d.windows[w].start, both[0].windows[w].start);
    EXPECT_EQ(d.windows[w].end, both[0].windows[w].end);
  }
  EXPECT_TRUE(both[1].feasible) << both[1].explanation;
  EXPECT_EQ(std::make_pair(static_cast<int>((d.start - kNow) / Hours{1}), static_cast<int>((d.end - kNow) / Hours{1})),
            c.span)
      << d.explanation;
  EXPECT_EQ(d.forecast_extended, c.span.second > 12);
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, LongerThanTheLookahead,
    ::testing::Values(
        LongJobCase{"a 30 h job with a 12 h look-ahead starts now", 30, false, 0, P::kSpatioTemporal, true, {0, 30}, ""},
        LongJobCase{"a 30 h job under fifo starts now", 30, false, 0, P::kRunNowHome, true, {0, 30}, ""},
        LongJobCase{"a 30 h interruptible job runs in windows that end within its 31 h", 30, true, 0,
                    P::kSpatioTemporal, true, {0, 30}, ""},
        LongJobCase{"a 30 h job in a region busy for the first 2 h waits for a later pass", 30, false, 2,
                    P::kSpatioTemporal, false, {0, 0}, "within the 31 h its run needs"},
        LongJobCase{"a 10 h job in a region busy for 2 h is planned within the look-ahead", 10, false, 2,
                    P::kSpatioTemporal, true, {2, 12}, ""}));

TEST(Placement, PassCommitsCapacitySoJobsDoNotCollide) {
  std::vector<Region> regions{make_region({"A", 64, 300, {}}), make_region({"B", 8, 10, {}}),
                              make_region({"C", 8, 20, {}})};
  std::vector<Job> jobs{{"early", 8, Hours{4}, kNow, kNow + Hours{4}, "A", {}, false},
                        {"late", 8, Hours{4}, kNow, kNow + Hours{5}, "A", {}, false}};
  CapacityLedger ledger;
  auto d = place_all(jobs, regions, ledger, kNow);
  ASSERT_TRUE(d[0].feasible && d[1].feasible);
  // Earliest deadline first: "early" takes B; "late" cannot wait for B
  // (4 h + 4 h > 5 h) and goes to C.
  EXPECT_EQ(d[0].region, "B");
  EXPECT_EQ(d[1].region, "C");
  EXPECT_EQ(ledger.used("B", kNow + Hours{1}), 8);
  EXPECT_EQ(ledger.used("C", kNow + Hours{3}), 8);
  EXPECT_EQ(ledger.used("C", kNow + Hours{4}), 0);
}

TEST(Placement, APassBreaksTiesBySubmissionOrderThenById) {
  // Room for one 8-GPU job in the clean region; two alike jobs want it.
  std::vector<Region> regions{make_region({"A", 64, 300, {}}), make_region({"B", 8, 10, {}})};
  Job first{"zz-submitted-first", 8, Hours{4}, kNow, kNow + Hours{4}, "A", {}, false};
  Job second{"aa-submitted-second", 8, Hours{4}, kNow, kNow + Hours{4}, "A", {}, false};
  first.seq = 1;
  second.seq = 2;
  CapacityLedger ledger;
  auto d = place_all({second, first}, regions, ledger, kNow);
  EXPECT_EQ(d[1].region, "B") << "the earlier submission wins the tie, whatever its id";
  EXPECT_EQ(d[0].region, "A");
  EXPECT_EQ(d[1].explanation.rfind("Job zz-submitted-first ", 0), 0u) << d[1].explanation;
  // Without a submission order (a trace): the id decides.
  first.seq = second.seq = 0;
  CapacityLedger again;
  auto e = place_all({second, first}, regions, again, kNow);
  EXPECT_EQ(e[0].region, "B");
  EXPECT_EQ(e[1].region, "A");
}

TEST(Placement, InterruptibleWindowsRespectMaxWindowsAndOverhead) {
  // Clean hours alternate: splitting into 4 windows would be cheapest.
  Region r = make_region({"A", 64, 400, {{1, 2, 10}, {3, 4, 10}, {5, 6, 10}, {7, 8, 10}}});
  Job job{"j", 8, Hours{4}, kNow, kNow + Hours{24}, "A", {}, true};
  job.resume_overhead = Seconds{0};
  PlacementOptions opt;
  opt.max_windows = 2;
  auto d = place(job, {r}, CapacityLedger{}, kNow, opt);
  ASSERT_TRUE(d.feasible);
  EXPECT_LE(d.windows.size(), 2u);
  Seconds run{0};
  for (const auto& w : d.windows) run += w.end - w.start;
  EXPECT_EQ(run, Hours{4});
  // A large resume overhead makes one contiguous window the better plan.
  job.resume_overhead = Hours{3};
  opt.max_windows = 6;
  auto one = place(job, {r}, CapacityLedger{}, kNow, opt);
  ASSERT_TRUE(one.feasible);
  EXPECT_EQ(one.windows.size(), 1u);
}

// Capacity pricing (PlacementOptions::expected_load_by_hour_of_week). kNow is
// a Monday 00:00, so slot k is hour k of the week. Regions: A clean (50) and
// B dirty (300), 16 GPUs each unless the case says otherwise.
struct PricingCase {
  const char* name;
  std::vector<RegionSpec> regions;
  int deadline_h;                 // job: 8 GPUs, 4 h, not interruptible
  std::vector<Reservation> planned;
  int busy_to_h;                  // expected load `busy_load` in hours [0, busy_to_h), 0 after
  double busy_load;
  double weight;                  // capacity_price_weight
  std::string region;
  std::vector<std::pair<int, int>> windows;
};

void PrintTo(const PricingCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class CapacityPricingTable : public ::testing::TestWithParam<PricingCase> {};

TEST_P(CapacityPricingTable, RanksByIntensityPlusTheOpportunityCostOfCapacity) {
  const auto& c = GetParam();
  std::vector<Region> regions;
  for (const auto& r : c.regions) regions.push_back(make_region(r));
  CapacityLedger ledger;
  for (const auto& p : c.planned) ledger.reserve(p.region, kNow + Hours{p.from_h}, kNow + Hours{p.to_h}, p.gpus);
  Job job{"job", 8, Hours{4}, kNow, kNow + Hours{c.deadline_h}, "A", {}, false};
  PlacementOptions opt;
  opt.max_lookahead = Hours{48};
  opt.expected_load_by_hour_of_week.assign(168, 0.0);
  for (int h = 0; h < c.busy_to_h; ++h) opt.expected_load_by_hour_of_week[h] = c.busy_load;
  opt.capacity_price_weight = c.weight;
  auto d = place(job, regions, ledger, kNow, opt);
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_EQ(d.region, c.region) << d.explanation;
  std::vector<std::pair<int, int>> got;
  for (const auto& w : d.windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Hours{1}), static_cast<int>((w.end - kNow) / Hours{1}));
  EXPECT_EQ(got, c.windows) << d.explanation;
  // Prices only rank plans: the reported grams are the forecast's.
  double per_h = c.region == "A" ? 50 : c.region == "B" ? 300 : 100;
  EXPECT_DOUBLE_EQ(d.expected_grams, 8 * 4 * per_h);
}

const RegionSpec kClean{"A", 16, 50, {}};
const RegionSpec kDirty{"B", 16, 300, {}};

INSTANTIATE_TEST_SUITE_P(
    Carbon, CapacityPricingTable,
    ::testing::Values(
        PricingCase{"a job with slack leaves clean capacity in busy hours to the jobs that will need it",
                    {kClean, kDirty}, 48, {}, 24, 1.0, 0.75, "A", {{24, 28}}},
        PricingCase{"a job without slack still takes clean capacity in a busy hour",
                    {kClean, kDirty}, 4, {}, 24, 1.0, 0.75, "A", {{0, 4}}},
        PricingCase{"when every hour is equally busy the cleanest region still wins, now",
                    {kClean, kDirty}, 48, {}, 168, 1.0, 0.75, "A", {{0, 4}}},
        PricingCase{"an expected load that the clean region alone can carry, even 20 % more of it, puts no price on it",
                    {kClean, kDirty}, 48, {}, 24, 0.4, 0.75, "A", {{0, 4}}},
        PricingCase{"an expected load that just fills the clean region is priced by the chance that it overflows",
                    {kClean, kDirty}, 48, {}, 24, 0.5, 0.75, "A", {{24, 28}}},
        PricingCase{"weight 0 turns capacity pricing off",
                    {kClean, kDirty}, 48, {}, 24, 1.0, 0.0, "A", {{0, 4}}},
        PricingCase{"planned load above the expectation makes busy hours expensive too",
                    {kClean, kDirty, {"C", 16, 100, {}}}, 48, {{"B", 0, 24, 16}, {"C", 0, 24, 16}}, 0, 0.0, 0.75,
                    "A", {{24, 28}}}),
    [](const ::testing::TestParamInfo<PricingCase>& info) { return gstest::test_name(info.param.name); });

// Decisions are final: a patient job placed in an earlier pass, then an
// urgent one. Only capacity pricing leaves the clean hours now to the urgent
// job.
struct TwoPassCase {
  const char* name;
  double weight;
  std::vector<std::pair<int, int>> patient_windows;
  std::string urgent_region;
};

void PrintTo(const TwoPassCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class CapacityPricingPasses : public ::testing::TestWithParam<TwoPassCase> {};

TEST_P(CapacityPricingPasses, ThePatientJobLeavesCleanCapacityToTheUrgentOne) {
  const auto& c = GetParam();
  std::vector<Region> regions{make_region({"A", 8, 50, {}}), make_region({"B", 64, 300, {}})};
  PlacementOptions opt;
  opt.max_lookahead = Hours{48};
  opt.expected_load_by_hour_of_week.assign(168, 0.0);
  for (int h = 0; h < 24; ++h) opt.expected_load_by_hour_of_week[h] = 1.0;
  opt.capacity_price_weight = c.weight;
  CapacityLedger ledger;
  auto first = place_all({Job{"patient", 8, Hours{4}, kNow, kNow + Hours{48}, "A", {}, false}}, regions, ledger, kNow, opt);
  ASSERT_TRUE(first[0].feasible);
  std::vector<std::pair<int, int>> got;
  for (const auto& w : first[0].windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Hours{1}), static_cast<int>((w.end - kNow) / Hours{1}));
  EXPECT_EQ(got, c.patient_windows);
  auto second = place_all({Job{"urgent", 8, Hours{4}, kNow, kNow + Hours{4}, "A", {}, false}}, regions, ledger, kNow, opt);
  ASSERT_TRUE(second[0].feasible);
  EXPECT_EQ(second[0].region, c.urgent_region);
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, CapacityPricingPasses,
    ::testing::Values(
        TwoPassCase{"a job with slack waits for clean capacity in a quiet hour so an urgent job finds it now", 0.75,
                    {{24, 28}}, "A"},
        TwoPassCase{"without capacity pricing the patient job takes the clean hours and the urgent one runs dirty",
                    0.0, {{0, 4}}, "B"}),
    [](const ::testing::TestParamInfo<TwoPassCase>& info) { return gstest::test_name(info.param.name); });

TEST(Placement, ExpectedLoadProfileMustCoverTheWeek) {
  std::vector<Region> regions{make_region(kClean)};
  Job job{"j", 8, Hours{4}, kNow, kNow + Hours{24}, "A", {}, false};
  PlacementOptions opt;
  opt.expected_load_by_hour_of_week.assign(24, 0.5);
  EXPECT_THROW(place(job, regions, CapacityLedger{}, kNow, opt), CarbonError);
  opt.expected_load_by_hour_of_week.assign(168, 0.5);
  opt.capacity_price_weight = -1;
  EXPECT_THROW(place(job, regions, CapacityLedger{}, kNow, opt), CarbonError);
  opt.capacity_price_weight = 0.9;
  for (double spread : {-0.1, 1.5, std::nan("")}) {
    opt.capacity_price_load_spread = spread;
    EXPECT_THROW(place(job, regions, CapacityLedger{}, kNow, opt), CarbonError) << spread;
  }
}

TEST(Placement, WithNoLoadSpreadTheExpectedLoadAloneSetsThePrice) {
  // Load 0.5 of 32 GPUs just fills the clean region: with no spread the
  // next job's marginal region is the clean one itself (no price), so the
  // job runs now; with the default band it may overflow, so it waits for
  // the unpriced hours.
  std::vector<Region> regions{make_region(kClean), make_region(kDirty)};
  Job job{"j", 8, Hours{4}, kNow, kNow + Hours{48}, "A", {}, false};
  PlacementOptions opt;
  opt.max_lookahead = Hours{48};
  opt.expected_load_by_hour_of_week.assign(168, 0.0);
  for (int h = 0; h < 24; ++h) opt.expected_load_by_hour_of_week[h] = 0.5;
  opt.capacity_price_load_spread = 0;
  EXPECT_EQ(place(job, regions, CapacityLedger{}, kNow, opt).start, kNow);
  opt.capacity_price_load_spread = 0.2;
  EXPECT_EQ(place(job, regions, CapacityLedger{}, kNow, opt).start, kNow + Hours{24});
}

TEST(Placement, BadJobsAreInfeasibleWithAReason) {
  std::vector<Region> regions{make_region({"A", 64, 300, {}})};
  Job zero{"z", 0, Hours{1}, kNow, kNow + Hours{5}, "A", {}, false};
  EXPECT_NE(place(zero, regions, {}, kNow).reason.find("GPUs"), std::string::npos);
  Job nodur{"n", 8, Seconds{0}, kNow, kNow + Hours{5}, "A", {}, false};
  EXPECT_NE(place(nodur, regions, {}, kNow).reason.find("duration"), std::string::npos);
  Region stale = make_region({"A", 64, 300, {}});
  auto d = place(Job{"s", 8, Hours{1}, kNow, kNow + Hours{70}, "A", {}, false}, {stale}, {}, kNow + Hours{49});
  EXPECT_FALSE(d.feasible);
  EXPECT_NE(d.reason.find("does not contain"), std::string::npos) << d.reason;
}

// Sub-hourly forecasts (placement.h, "Slots"): the pass's slot is the finest
// forecast step among its regions; a coarser forecast is expanded to it.
// Regions: a `step_min`-minute forecast over 48 h from kNow, `base`
// everywhere except [from, to) minutes after kNow (multiples of the step).
using Minutes = std::chrono::minutes;

struct StepRegion {
  std::string name;
  int capacity;
  int step_min;
  double base;
  std::vector<std::tuple<int, int, double>> dips;
};

Region make_step_region(const StepRegion& r) {
  std::vector<double> v(static_cast<size_t>(48 * 60 / r.step_min), r.base);
  for (auto [a, b, x] : r.dips)
    for (int m = a; m < b; m += r.step_min) v[static_cast<size_t>(m / r.step_min)] = x;
  Region g;
  g.name = r.name;
  g.capacity = r.capacity;
  g.pue = 1.0;
  g.hardware = plain();
  g.forecast = IntensitySeries(r.name, kNow, Minutes{r.step_min}, v);
  return g;
}

struct MinuteReservation {
  std::string region;
  int from_min, to_min, gpus;
};

struct SubHourlyCase {
  const char* name;
  std::vector<StepRegion> regions;
  int gpus;
  int minutes;                    // run time
  int deadline_min;               // from kNow
  int now_min;                    // now = kNow + now_min
  bool interruptible;
  std::vector<MinuteReservation> planned;
  // expectations
  bool feasible;
  std::string region;
  std::vector<std::pair<int, int>> windows;   // minutes from kNow
  std::vector<std::string> reason_has;
};

void PrintTo(const SubHourlyCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class SubHourlyPlacement : public ::testing::TestWithParam<SubHourlyCase> {};

TEST_P(SubHourlyPlacement, PicksWindowsAtTheForecastStep) {
  const auto& c = GetParam();
  std::vector<Region> regions;
  for (const auto& r : c.regions) regions.push_back(make_step_region(r));
  CapacityLedger ledger;
  for (const auto& p : c.planned) ledger.reserve(p.region, kNow + Minutes{p.from_min}, kNow + Minutes{p.to_min}, p.gpus);
  const Time now = kNow + Minutes{c.now_min};
  Job job;
  job.id = "job";
  job.gpus = c.gpus;
  job.duration = Minutes{c.minutes};
  job.submit = now;
  job.deadline = kNow + Minutes{c.deadline_min};
  job.home_region = c.regions.front().name;
  job.interruptible = c.interruptible;
  job.resume_overhead = Seconds{0};
  PlacementOptions opt;
  opt.max_lookahead = Hours{48};
  auto d = place(job, regions, ledger, now, opt);
  ASSERT_EQ(d.feasible, c.feasible) << d.explanation;
  if (!c.feasible) {
    for (const auto& s : c.reason_has) EXPECT_NE(d.reason.find(s), std::string::npos) << "reason: " << d.reason;
    return;
  }
  EXPECT_EQ(d.region, c.region) << d.explanation;
  std::vector<std::pair<int, int>> got;
  for (const auto& w : d.windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Minutes{1}), static_cast<int>((w.end - kNow) / Minutes{1}));
  EXPECT_EQ(got, c.windows) << d.explanation;
  EXPECT_TRUE(d.deadline_met) << d.explanation;
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, SubHourlyPlacement,
    ::testing::Values(
        SubHourlyCase{"on 30-minute data the run starts on the half hour that is cleanest",
                      {{"A", 64, 30, 300, {{150, 270, 50}}}}, 8, 120, 24 * 60, 0, false, {},
                      true, "A", {{150, 270}}, {}},
        SubHourlyCase{"on 15-minute data the run starts on the cleanest quarter hour",
                      {{"A", 64, 15, 300, {{195, 255, 40}}}}, 8, 60, 24 * 60, 0, false, {},
                      true, "A", {{195, 255}}, {}},
        SubHourlyCase{"on 5-minute data the run starts on the cleanest five minutes",
                      {{"A", 64, 5, 300, {{65, 95, 40}}}}, 8, 30, 24 * 60, 0, false, {},
                      true, "A", {{65, 95}}, {}},
        SubHourlyCase{"on hourly data the run still starts on the hour",
                      {{"A", 64, 60, 300, {{120, 240, 50}}}}, 8, 120, 24 * 60, 0, false, {},
                      true, "A", {{120, 240}}, {}},
        SubHourlyCase{"a half-hour dip inside an hour is found only at the 30-minute step",
                      {{"A", 64, 30, 300, {{90, 120, 10}, {120, 150, 10}}}}, 8, 60, 24 * 60, 0, false, {},
                      true, "A", {{90, 150}}, {}},
        SubHourlyCase{"an hourly region planned with a 30-minute one is expanded and may start on a half hour",
                      {{"A", 64, 60, 300, {{120, 180, 100}, {180, 240, 50}}}, {"B", 64, 30, 500, {}}}, 8, 90, 24 * 60,
                      0, false, {}, true, "A", {{150, 240}}, {}},
        SubHourlyCase{"a 30-minute region next to an hourly one wins with its clean half hours",
                      {{"A", 64, 60, 300, {}}, {"B", 64, 30, 500, {{330, 390, 20}}}}, 8, 60, 24 * 60, 0, false, {},
                      true, "B", {{330, 390}}, {}},
        SubHourlyCase{"an interruptible job on 30-minute data runs in half-hour windows",
                      {{"A", 64, 30, 400, {{60, 90, 10}, {150, 180, 10}, {240, 270, 10}}}}, 8, 90, 24 * 60, 0, true, {},
                      true, "A", {{60, 90}, {150, 180}, {240, 270}}, {}},
        SubHourlyCase{"a run that must start now starts at now inside its half hour",
                      {{"A", 64, 30, 300, {{30, 90, 10}}}}, 8, 60, 100, 40, false, {},
                      true, "A", {{40, 100}}, {}},
        SubHourlyCase{"a deadline on a half hour admits a run that ends exactly on it",
                      {{"A", 64, 30, 300, {{0, 60, 500}, {60, 90, 10}}}}, 8, 30, 90, 0, false, {},
                      true, "A", {{60, 90}}, {}},
        SubHourlyCase{"a planned half hour blocks its whole hour (the ledger is hourly)",
                      {{"A", 8, 30, 300, {{120, 150, 10}}}}, 8, 30, 24 * 60, 0, false, {{"A", 150, 180, 8}},
                      true, "A", {{0, 30}}, {}},
        SubHourlyCase{"a forecast at a step other than 5, 15, 30 or 60 minutes is refused naming the step",
                      {{"A", 64, 20, 300, {}}}, 8, 60, 24 * 60, 0, false, {},
                      false, "", {}, {"A: forecast step of 20 min is not supported"}},
        SubHourlyCase{"a region with an unsupported step is refused and the others still serve the job",
                      {{"A", 64, 20, 100, {}}, {"B", 64, 30, 300, {}}}, 8, 60, 24 * 60, 0, false, {},
                      true, "B", {{0, 60}}, {}}),
    [](const ::testing::TestParamInfo<SubHourlyCase>& info) { return gstest::test_name(info.param.name); });

// A 150-minute interruptible job (10-minute resume overhead: a third of a
// slot): its five cleanest half hours are apart, so five windows would need
// 150 + 4 x 10 minutes, i.e. the two next cleanest half hours too (they
// extend the first window). Then the first four windows already hold all
// the work, and a fifth would hold only its overhead -- a restart for
// nothing (the service's gang ends when its work is done and never runs
// it). The plan has four windows.
TEST(Placement, AnInterruptibleJobGetsNoWindowThatOnlyPaysItsResumeOverhead) {
  Region r = make_step_region({"A", 64, 30, 300,
                               {{60, 90, 10}, {90, 150, 20}, {180, 210, 10}, {270, 300, 10}, {360, 390, 10},
                                {450, 480, 10}}});
  Job job{"j", 8, Minutes{150}, kNow, kNow + Hours{24}, "A", {}, true};
  ASSERT_EQ(job.resume_overhead, Minutes{10});
  auto d = place(job, {r}, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible) << d.explanation;
  std::vector<std::pair<int, int>> got;
  for (const auto& w : d.windows)
    got.emplace_back(static_cast<int>((w.start - kNow) / Minutes{1}), static_cast<int>((w.end - kNow) / Minutes{1}));
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{60, 150}, {180, 210}, {270, 300}, {360, 390}})) << d.explanation;
  // 150 minutes of work + 3 x 10 of overhead, all in the planned half hours.
  EXPECT_DOUBLE_EQ(d.expected_operational_grams, 8 * 0.5 * (10 + 20 + 20 + 10 + 10 + 10));
}

TEST(Placement, ThirtyMinuteGramsAreExactPerHalfHour) {
  Region r = make_step_region({"A", 64, 30, 300, {{150, 180, 20}, {180, 240, 50}, {240, 270, 80}}});
  Job job{"j", 8, Hours{2}, kNow, kNow + Hours{24}, "A", {}, false};
  auto d = place(job, {r}, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_EQ(d.start, kNow + Minutes{150});
  EXPECT_EQ(d.end, kNow + Minutes{270});
  // 8 kW x 0.5 h x (20 + 50 + 50 + 80); run now: 8 kW x 2 h x 300.
  EXPECT_DOUBLE_EQ(d.expected_grams, 8 * 0.5 * (20 + 50 + 50 + 80));
  EXPECT_DOUBLE_EQ(d.run_now_home_grams, 8 * 2 * 300);
  EXPECT_NE(d.explanation.find("Waits 2.5 h"), std::string::npos) << d.explanation;
}

TEST(Placement, ThirtyMinuteForecastShorterThanTheDeadlineIsExtendedAndSaid) {
  // 24.5 h of 30-minute forecast; the dip repeats 24 h later.
  std::vector<double> v(49, 300);
  v[40] = v[41] = 50;   // 20:00-21:00
  Region r = make_step_region({"A", 64, 30, 300, {}});
  r.forecast = IntensitySeries("A", kNow, Minutes{30}, v);
  CapacityLedger ledger;
  ledger.reserve("A", kNow + Hours{20}, kNow + Hours{21}, 64);
  Job job{"j", 8, Hours{1}, kNow, kNow + Hours{60}, "A", {}, false};
  auto d = place(job, {r}, ledger, kNow);
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_TRUE(d.forecast_extended);
  EXPECT_NE(d.explanation.find("beyond the 24.5 h forecast"), std::string::npos) << d.explanation;
}

TEST(Placement, PassOnThirtyMinuteDataReservesWholeHoursAndNeverOverCommits) {
  // Two 30-minute jobs both want the clean hour 02:00-03:00 of an 8-GPU
  // region: the first takes 02:00-02:30 and, the ledger being hourly, holds
  // the hour; the second runs elsewhere in time rather than share it.
  Region r = make_step_region({"A", 8, 30, 300, {{120, 150, 10}, {150, 180, 20}, {300, 330, 100}}});
  std::vector<Job> jobs{{"first", 8, Minutes{30}, kNow, kNow + Hours{10}, "A", {}, false},
                        {"second", 8, Minutes{30}, kNow, kNow + Hours{11}, "A", {}, false}};
  CapacityLedger ledger;
  auto d = place_all(jobs, {r}, ledger, kNow);
  ASSERT_TRUE(d[0].feasible && d[1].feasible);
  EXPECT_EQ(d[0].start, kNow + Minutes{120});
  EXPECT_EQ(d[0].end, kNow + Minutes{150});
  EXPECT_EQ(d[1].start, kNow + Minutes{300});
  for (int h = 0; h < 24; ++h) EXPECT_LE(ledger.used("A", kNow + Hours{h}), 8) << "hour " << h;
  EXPECT_EQ(ledger.used("A", kNow + Hours{2}), 8);
  EXPECT_EQ(ledger.used("A", kNow + Hours{5}), 8);
}

TEST(Placement, ElasticWindowsOnThirtyMinuteDataStartOnTheSlotGrid) {
  Region a = make_step_region({"A", 16, 30, 300, {{150, 270, 40}}});
  Region b = make_step_region({"B", 16, 30, 350, {{330, 450, 30}}});
  Job job{"e", 8, Hours{3}, kNow, kNow + Hours{12}, "A", {}, true};
  job.min_gpus = 4;
  job.max_gpus = 16;
  job.migratable = true;
  auto d = place(job, {a, b}, CapacityLedger{}, kNow);
  ASSERT_TRUE(d.feasible) << d.explanation;
  EXPECT_TRUE(d.deadline_met) << d.explanation;
  for (const auto& w : d.windows) {
    EXPECT_EQ((w.start - kNow) % Minutes{30}, Seconds{0}) << d.explanation;
    EXPECT_LT(w.start, w.end) << d.explanation;
  }
}

}  // namespace
}  // namespace carbon
