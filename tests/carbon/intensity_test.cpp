#include "carbon/error.h"
#include "carbon/intensity.h"

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

}  // namespace
}  // namespace carbon
