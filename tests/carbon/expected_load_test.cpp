// ExpectedLoad: the capacity-pricing load learned from realized hours.
#include "carbon/error.h"
#include "carbon/expected_load.h"

#include <gtest/gtest.h>

namespace carbon {
namespace {

const Time kMonday = parse_time("2023-06-05T00:00Z");

TEST(ExpectedLoad, HourOfTheWeekStartsOnMondayMidnightUtc) {
  EXPECT_EQ(ExpectedLoad::hour_of_week(kMonday), 0);
  EXPECT_EQ(ExpectedLoad::hour_of_week(kMonday + Hours{1} + std::chrono::minutes{59}), 1);
  EXPECT_EQ(ExpectedLoad::hour_of_week(kMonday + Hours{167}), 167);
  EXPECT_EQ(ExpectedLoad::hour_of_week(kMonday + Hours{168}), 0);
  EXPECT_EQ(ExpectedLoad::hour_of_week(parse_time("1970-01-01T00:00Z")), 3 * 24);  // a Thursday
  EXPECT_EQ(ExpectedLoad::hour_of_week(parse_time("1969-12-29T05:00Z")), 5);       // a Monday before 1970
}

TEST(ExpectedLoad, NothingIsPricedUntilEveryHourOfTheWeekWasSeen) {
  ExpectedLoad e(0.5);
  for (int h = 0; h < 167; ++h) e.observe(kMonday + Hours{h}, 0.25);
  EXPECT_FALSE(e.ready());
  EXPECT_TRUE(e.by_hour_of_week().empty());
  e.observe(kMonday + Hours{167}, 0.75);
  ASSERT_TRUE(e.ready());
  auto v = e.by_hour_of_week();
  ASSERT_EQ(v.size(), 168u);
  EXPECT_DOUBLE_EQ(v[0], 0.25);
  EXPECT_DOUBLE_EQ(v[167], 0.75);
}

TEST(ExpectedLoad, LaterWeeksMoveTheirHourByTheLearningRate) {
  ExpectedLoad e(0.5);
  for (int h = 0; h < 168; ++h) e.observe(kMonday + Hours{h}, 0.2);
  e.observe(kMonday + Hours{168 + 10}, 0.6);   // next week's hour 10
  auto v = e.by_hour_of_week();
  EXPECT_DOUBLE_EQ(v[10], 0.4);   // 0.2 + 0.5 * (0.6 - 0.2)
  EXPECT_DOUBLE_EQ(v[11], 0.2);
}

TEST(ExpectedLoad, ReplayingAnHourAlreadySeenChangesNothing) {
  ExpectedLoad a(0.3), b(0.3);
  for (int h = 0; h < 200; ++h) {
    a.observe(kMonday + Hours{h}, (h % 7) / 7.0);
    b.observe(kMonday + Hours{h}, (h % 7) / 7.0);
  }
  for (int h = 150; h < 200; ++h) b.observe(kMonday + Hours{h}, 1.0);  // replayed history: ignored
  EXPECT_EQ(a.by_hour_of_week(), b.by_hour_of_week());
  EXPECT_EQ(b.last_observed(), kMonday + Hours{199});
}

TEST(ExpectedLoad, ALearningRateOutsideZeroToOneIsRefused) {
  EXPECT_THROW(ExpectedLoad(0.0), CarbonError);
  EXPECT_THROW(ExpectedLoad(1.5), CarbonError);
  EXPECT_NO_THROW(ExpectedLoad(1.0));
}

}  // namespace
}  // namespace carbon
