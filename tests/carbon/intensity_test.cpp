#include "carbon/error.h"
#include "carbon/intensity.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <cmath>

namespace carbon {
namespace {

const Time kT0 = parse_time("2023-01-01 00:00:00");

TEST(Time, ParsesEveryDocumentedForm) {
  EXPECT_EQ(to_unix(kT0), 1672531200);
  for (const char* s : {"2023-01-01T00:00:00Z", "2023-01-01T00:00Z", "2023-01-01T00:00:00.000Z",
                        "2023-01-01T01:00:00+01:00", "1672531200", "2023-01-01"})
    EXPECT_EQ(parse_time(s), kT0) << s;
  Time t;
  for (const char* s : {"", "2023-13-01T00:00Z", "2023-02-30", "yesterday", "2023-01-01T25:00Z", "2023-01-01T00:00Zulu"})
    EXPECT_FALSE(parse_time(s, &t)) << s;
  EXPECT_EQ(format_time(kT0 + Hours{25} + Seconds{7}), "2023-01-02T01:00:07Z");
  EXPECT_EQ(weekday(kT0), 0);  // 2023-01-01 was a Sunday
  EXPECT_EQ(hour_of_day(kT0 + Hours{30}), 6);
}

TEST(IntensitySeries, IntegralIsExactForPiecewiseConstant) {
  IntensitySeries s("Z", kT0, Hours{1}, {100, 200, 400});
  EXPECT_DOUBLE_EQ(s.integral_hours(kT0, kT0 + Hours{3}), 700);
  EXPECT_DOUBLE_EQ(s.integral_hours(kT0 + std::chrono::minutes{30}, kT0 + std::chrono::minutes{150}), 50 + 200 + 200);
  EXPECT_DOUBLE_EQ(s.mean(kT0, kT0 + Hours{2}), 150);
  EXPECT_DOUBLE_EQ(s.at(kT0 + std::chrono::minutes{119}), 200);
  EXPECT_THROW(s.at(kT0 + Hours{3}), CarbonError);
  EXPECT_THROW(s.integral_hours(kT0 - Hours{1}, kT0), CarbonError);
  auto sl = s.slice(kT0 + std::chrono::minutes{90}, kT0 + Hours{3});
  EXPECT_EQ(sl.start(), kT0 + Hours{1});
  EXPECT_EQ(sl.size(), 2u);
}

TEST(IntensitySeries, RejectsInvalidValues) {
  EXPECT_THROW(IntensitySeries("Z", kT0, Hours{1}, {}), CarbonError);
  EXPECT_THROW(IntensitySeries("Z", kT0, Hours{1}, {1, -1}), CarbonError);
  EXPECT_THROW(IntensitySeries("Z", kT0, Hours{1}, {1, NAN}), CarbonError);
}

TEST(IntensitySeries, FromSamplesRejectsGapsDuplicatesAndDisorder) {
  std::vector<IntensitySample> ok{{kT0, 1}, {kT0 + Hours{1}, 2}};
  EXPECT_EQ(IntensitySeries::from_samples("Z", ok).size(), 2u);
  std::vector<IntensitySample> gap{{kT0, 1}, {kT0 + Hours{3}, 2}};
  EXPECT_THROW(IntensitySeries::from_samples("Z", gap), CarbonError);
  auto filled = IntensitySeries::from_samples("Z", gap, Hours{1}, 2);
  EXPECT_EQ(filled.size(), 4u);
  EXPECT_DOUBLE_EQ(filled[2], 1);  // held
  std::vector<IntensitySample> dup{{kT0, 1}, {kT0, 2}};
  EXPECT_THROW(IntensitySeries::from_samples("Z", dup), CarbonError);
  std::vector<IntensitySample> back{{kT0 + Hours{1}, 1}, {kT0, 2}};
  EXPECT_THROW(IntensitySeries::from_samples("Z", back), CarbonError);
}

// IntensitySeries::detect_step: the step of a source's points, or an error
// naming the first bad timestamp.
struct StepCase {
  const char* name;
  std::vector<long> offsets_s;   // sample times, seconds after kT0
  long step_s;                   // expected step; 0: throws
  const char* error_has;
};

void PrintTo(const StepCase& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class DetectStep : public ::testing::TestWithParam<StepCase> {};

TEST_P(DetectStep, FindsTheStepOrNamesTheFirstBadTimestamp) {
  const auto& c = GetParam();
  std::vector<IntensitySample> samples;
  for (long o : c.offsets_s) samples.push_back({kT0 + Seconds{o}, 100.0 + static_cast<double>(samples.size())});
  if (c.step_s > 0) {
    EXPECT_EQ(IntensitySeries::detect_step("Z", samples), Seconds{c.step_s});
    return;
  }
  try {
    IntensitySeries::detect_step("Z", samples);
    FAIL() << "no error for: " << c.name;
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find(c.error_has), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Carbon, DetectStep,
    ::testing::Values(
        StepCase{"5-minute points are a 5-minute series", {0, 300, 600}, 300, ""},
        StepCase{"15-minute points are a 15-minute series", {0, 900, 1800}, 900, ""},
        StepCase{"30-minute points may start on a half hour", {1800, 3600, 5400}, 1800, ""},
        StepCase{"hourly points are an hourly series", {0, 3600, 7200}, 3600, ""},
        StepCase{"a first spacing longer than an hour is an hourly series with a gap", {0, 3 * 3600, 4 * 3600}, 3600, ""},
        StepCase{"a single point on the hour is hourly", {3600}, 3600, ""},
        StepCase{"a single point on a half hour is a 30-minute series", {1800}, 1800, ""},
        StepCase{"a single point on a quarter hour is a 15-minute series", {2700}, 900, ""},
        StepCase{"a 20-minute spacing is not a supported step", {0, 1200, 2400}, 0,
                 "2023-01-01T00:20:00Z is 1200 s after the previous one"},
        StepCase{"a 30-minute series off its grid is misaligned at its first point", {900, 2700, 4500}, 0,
                 "2023-01-01T00:15:00Z is not on the 30-minute grid"},
        StepCase{"a finer step mixed into a 30-minute series is rejected where it starts", {0, 1800, 2700, 3600}, 0,
                 "2023-01-01T00:45:00Z is not on the 30-minute grid"},
        StepCase{"a first spacing of 90 minutes is hourly and its second point is off the grid", {0, 5400}, 0,
                 "2023-01-01T01:30:00Z is not on the hourly grid"},
        StepCase{"a duplicate timestamp is rejected", {0, 1800, 1800}, 0, "duplicate timestamp 2023-01-01T00:30:00Z"},
        StepCase{"unsorted timestamps are rejected", {1800, 0}, 0, "unsorted timestamp 2023-01-01T00:00:00Z"},
        StepCase{"a single point off the 5-minute grid is rejected", {60}, 0,
                 "2023-01-01T00:01:00Z is not on the 5-minute grid"}),
    [](const ::testing::TestParamInfo<StepCase>& info) { return gstest::test_name(info.param.name); });

TEST(IntensitySeries, SubHourlySeriesFromSamplesIntegralsAndSlices) {
  const Seconds half = std::chrono::minutes{30};
  std::vector<IntensitySample> pts{{kT0, 100}, {kT0 + half, 300}, {kT0 + 2 * half, 200}};
  auto s = IntensitySeries::from_samples("Z", pts, IntensitySeries::kDetectStep);
  EXPECT_EQ(s.step(), half);
  EXPECT_EQ(s.values(), (std::vector<double>{100, 300, 200}));   // not averaged
  EXPECT_DOUBLE_EQ(s.integral_hours(kT0, kT0 + Hours{1}), 0.5 * 100 + 0.5 * 300);
  EXPECT_DOUBLE_EQ(s.at(kT0 + std::chrono::minutes{45}), 300);
  auto sl = s.slice(kT0 + std::chrono::minutes{40}, kT0 + std::chrono::minutes{70});
  EXPECT_EQ(sl.start(), kT0 + half);
  EXPECT_EQ(sl.values(), (std::vector<double>{300, 200}));
  // A missing half hour is a gap of one step (filled only when allowed).
  std::vector<IntensitySample> gap{{kT0, 1}, {kT0 + half, 2}, {kT0 + 3 * half, 3}};
  EXPECT_THROW(IntensitySeries::from_samples("Z", gap, IntensitySeries::kDetectStep), CarbonError);
  EXPECT_EQ(IntensitySeries::from_samples("Z", gap, IntensitySeries::kDetectStep, 1).size(), 4u);
}

TEST(IntensitySeries, StepsGridsAndNames) {
  for (long m : {5, 15, 30, 60}) EXPECT_TRUE(is_supported_step(std::chrono::minutes{m})) << m;
  for (long m : {1, 10, 20, 45, 90, 120}) EXPECT_FALSE(is_supported_step(std::chrono::minutes{m})) << m;
  EXPECT_EQ(step_name(Hours{1}), "hourly");
  EXPECT_EQ(step_name(std::chrono::minutes{15}), "15-minute");
  const Time t = kT0 + std::chrono::minutes{47};
  EXPECT_EQ(floor_to_step(t, std::chrono::minutes{30}), kT0 + std::chrono::minutes{30});
  EXPECT_EQ(ceil_to_step(t, std::chrono::minutes{30}), kT0 + Hours{1});
  EXPECT_EQ(floor_to_step(t, std::chrono::minutes{5}), kT0 + std::chrono::minutes{45});
  EXPECT_EQ(floor_to_step(t, Hours{1}), floor_hour(t));
  EXPECT_EQ(ceil_to_step(kT0, std::chrono::minutes{15}), kT0);
  EXPECT_EQ(floor_to_step(from_unix(-1), std::chrono::minutes{5}), from_unix(-300));
}

}  // namespace
}  // namespace carbon
