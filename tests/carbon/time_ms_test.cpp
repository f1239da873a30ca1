#include "carbon/time_ms.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace carbon {
namespace {

static_assert(kSecondMs == 1000 && kMinuteMs == 60'000 && kHourMs == 3'600'000);

// One rounding rule for every conversion: floor toward negative infinity.
struct MsCase {
  std::int64_t ms;
  std::int64_t hour;     // hours_of_ms
  std::int64_t hour_ms;  // floor_hour_ms
  int hour_of_day;       // hour_of_day_ms
  std::int64_t second;   // seconds_of_ms (also to_unix(time_of_ms))
  int millis;            // millis_of_second
};

TEST(TimeMs, ConversionsFloorTowardNegativeInfinity) {
  constexpr std::int64_t H = 3'600'000, D = 24 * H;
  const MsCase cases[] = {
      // ms                 hour   hour_ms    hod  second        millis
      {0,                   0,     0,          0,  0,            0},
      {1,                   0,     0,          0,  0,            1},
      {999,                 0,     0,          0,  0,            999},
      {1000,                0,     0,          0,  1,            0},
      {H - 1,               0,     0,          0,  3599,         999},
      {H,                   1,     H,          1,  3600,         0},
      {H + 1,               1,     H,          1,  3600,         1},
      {D - 1,               23,    23 * H,    23,  86399,        999},
      {D,                   24,    D,          0,  86400,        0},
      {-1,                  -1,    -H,        23,  -1,           999},
      {-999,                -1,    -H,        23,  -1,           1},
      {-1000,               -1,    -H,        23,  -1,           0},
      {-1001,               -1,    -H,        23,  -2,           999},
      {-H + 1,              -1,    -H,        23,  -3600,        1},
      {-H,                  -1,    -H,        23,  -3600,        0},
      {-H - 1,              -2,    -2 * H,    22,  -3601,        999},
      {-D,                  -24,   -D,         0,  -86400,       0},
      {-D - 1,              -25,   -D - H,    23,  -86401,       999},
      // 2025-12-02T00:00:00Z (an hour boundary) and 5 h 1.234 s after it.
      {1764633600000,       490176, 1764633600000, 0, 1764633600, 0},
      {1764633600000 + 5 * H + 1234, 490181, 1764633600000 + 5 * H, 5, 1764633600 + 5 * 3600 + 1, 234},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.ms);
    EXPECT_EQ(hours_of_ms(c.ms), c.hour);
    EXPECT_EQ(floor_hour_ms(c.ms), c.hour_ms);
    EXPECT_EQ(hour_of_day_ms(c.ms), c.hour_of_day);
    EXPECT_EQ(seconds_of_ms(c.ms), c.second);
    EXPECT_EQ(millis_of_second(c.ms), c.millis);
    EXPECT_EQ(to_unix(time_of_ms(c.ms)), c.second);
    EXPECT_EQ(ms_of_time(time_of_ms(c.ms)) + c.millis, c.ms);
  }
}

TEST(TimeMs, FloorDivAndModTable) {
  struct Case { std::int64_t a, b, q, r; };
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const Case cases[] = {
      {7, 2, 3, 1},   {6, 2, 3, 0},   {-7, 2, -4, 1}, {-6, 2, -3, 0}, {-1, 24, -1, 23},
      {0, 7, 0, 0},   {23, 24, 0, 23}, {24, 24, 1, 0}, {-24, 24, -1, 0}, {-25, 24, -2, 23},
      {kMax, 1000, kMax / 1000, kMax % 1000}, {kMin, 1000, kMin / 1000 - 1, 1000 + kMin % 1000},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.a) + " / " + std::to_string(c.b));
    EXPECT_EQ(floor_div(c.a, c.b), c.q);
    EXPECT_EQ(floor_mod(c.a, c.b), c.r);
  }
}

TEST(TimeMs, TimeRoundTripsOnWholeSeconds) {
  for (std::int64_t s : {std::int64_t{-86401}, std::int64_t{-1}, std::int64_t{0}, std::int64_t{1},
                         std::int64_t{1672531200}})
    EXPECT_EQ(time_of_ms(ms_of_time(from_unix(s))), from_unix(s)) << s;
  EXPECT_EQ(time_of_ms(-1), from_unix(-1));  // not from_unix(0): -1 ms is in the second before the epoch
}

}  // namespace
}  // namespace carbon
