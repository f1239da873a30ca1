// Epoch milliseconds (int64, UTC; the controller's and the worker's unit of
// time) and their one conversion to hours, seconds and carbon::Time.
//
// One rounding rule: every conversion floors toward negative infinity, so a
// millisecond always belongs to the second / hour that *contains* it, also
// before the epoch (negative epoch ms are possible in inputs):
//   floor_div(-1, 1000) == -1,  hours_of_ms(-1) == -1,  floor_hour_ms(-1) == -kHourMs.
// Plain `/` truncates toward zero and would put -1 ms in hour 0; do not
// divide epoch milliseconds by hand, use these.
#pragma once

#include <cstdint>

#include "carbon/time.h"

namespace carbon {

inline constexpr std::int64_t kSecondMs = 1000;
inline constexpr std::int64_t kMinuteMs = 60 * kSecondMs;
inline constexpr std::int64_t kHourMs = 60 * kMinuteMs;
inline constexpr std::int64_t kHoursPerDay = 24;

// a / b rounded toward negative infinity; b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
// a - b * floor_div(a, b), in [0, b); b > 0.
constexpr std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  const std::int64_t r = a % b;
  return r < 0 ? r + b : r;
}

// The hour containing ms, counted from the epoch (hour 0 = 1970-01-01T00Z).
constexpr std::int64_t hours_of_ms(std::int64_t ms) { return floor_div(ms, kHourMs); }
// Start (in ms) of the UTC hour containing ms.
constexpr std::int64_t floor_hour_ms(std::int64_t ms) { return hours_of_ms(ms) * kHourMs; }
// The UTC hour of day (0-23) of ms.
constexpr int hour_of_day_ms(std::int64_t ms) { return static_cast<int>(floor_mod(hours_of_ms(ms), kHoursPerDay)); }
// Unix seconds of the second containing ms.
constexpr std::int64_t seconds_of_ms(std::int64_t ms) { return floor_div(ms, kSecondMs); }
// The millisecond within its second (0-999).
constexpr int millis_of_second(std::int64_t ms) { return static_cast<int>(floor_mod(ms, kSecondMs)); }

// Epoch ms <-> carbon::Time (whole seconds): to_time floors to the second.
inline Time time_of_ms(std::int64_t ms) { return from_unix(seconds_of_ms(ms)); }
inline std::int64_t ms_of_time(Time t) { return to_unix(t) * kSecondMs; }

}  // namespace carbon
