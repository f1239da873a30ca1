// UTC time points used everywhere in carbon/: std::chrono::sys_seconds.
//
// carbon/ never reads the wall clock inside placement, forecasting or
// simulation; callers pass `now`. The only wall-clock read is
// system_clock_now() below, for callers that want a default Clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace carbon {

using Time = std::chrono::sys_seconds;   // UTC, whole seconds
using Hours = std::chrono::hours;
using Seconds = std::chrono::seconds;

// An injectable clock: returns "now" in UTC.
using Clock = std::function<Time()>;
Time system_clock_now();                  // the real clock (for main()s only)

// Unix seconds <-> Time.
inline std::int64_t to_unix(Time t) { return t.time_since_epoch().count(); }
inline Time from_unix(std::int64_t s) { return Time{Seconds{s}}; }

// Start of the UTC hour containing t / the next hour boundary >= t.
Time floor_hour(Time t);
Time ceil_hour(Time t);

// Parses a UTC timestamp. Accepted forms:
//   2023-01-01 00:00:00      2023-01-01T00:00:00Z      2023-01-01T00:00Z
//   2023-01-01T00:00:00.000Z 2023-01-01T00:00:00+00:00 (any +hh:mm offset)
//   1672531200               (integer unix seconds)
// Returns false (leaving *out untouched) on anything else.
bool parse_time(std::string_view text, Time* out);
// Same, throwing std::invalid_argument naming the text.
Time parse_time(std::string_view text);

// "2023-01-01T00:00:00Z".
std::string format_time(Time t);

// Hour of day (0-23) and weekday (0 = Sunday ... 6 = Saturday), UTC.
int hour_of_day(Time t);
int weekday(Time t);

}  // namespace carbon
