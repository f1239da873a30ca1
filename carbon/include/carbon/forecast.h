// Forecasters over a history of any supported step (5, 15, 30 or 60
// minutes, on its UTC grid; intensity.h).
//
// Contract: forecast(actual, now, horizon) returns `horizon` values at the
// step of `actual`, for the steps starting at t0 = floor_to_step(now, step)
// (on hourly data: `horizon` hourly values from floor_hour(now)). Every
// forecaster except PerfectForecaster reads only values strictly before t0;
// each needs some history, stated in hours of time whatever the step
// (persistence 1 h, seasonal-24 24 h, seasonal-168 168 h, blend 192 h:
// history_hours() x points per hour), and throws CarbonError when it is
// missing, or when the step is not supported or the series is off its
// grid. Seasons and profiles are in time as well: "the same hour yesterday"
// is the value 24 h / step points earlier (48 points on 30-minute data).
// So a sub-hourly series made by repeating each value of an hourly one
// gets, issued on the hour, the hourly forecast with each value repeated
// the same way. On hourly data every forecaster is exactly what it was.
// Pure functions of their arguments (the noise injector is seeded, not
// random).
#pragma once

#include "carbon/intensity.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace carbon {

class Forecaster {
 public:
  virtual ~Forecaster() = default;
  virtual std::string name() const = 0;
  // Hours of history needed before floor_to_step(now, step) (a time span:
  // 2 points per hour on 30-minute data).
  virtual int history_hours() const = 0;
  virtual std::vector<double> forecast(const IntensitySeries& actual, Time now, int horizon) const = 0;
};

// The last observed value (the step before t0), repeated.
std::shared_ptr<const Forecaster> persistence_forecaster();
// The value one season (24 h or 168 h, in points: season_hours x points per
// hour) before each target step; for leads beyond a season, repeated
// seasonally.
std::shared_ptr<const Forecaster> seasonal_naive_forecaster(int season_hours);
// "blend": persistence decaying into a level-adjusted daily profile (mean of
// the same time of day over the last 7 days, rescaled by last-24 h level),
// with a weekly term. The anomaly decays by 0.9 per hour of lead (point k
// of a sub-hourly forecast: 0.9^(floor(k / points per hour) + 1)). Beats
// both naive models on the 2023 data (see bench).
std::shared_ptr<const Forecaster> blend_forecaster();
// The actual future (simulation only). Throws when it is not recorded.
std::shared_ptr<const Forecaster> perfect_forecaster();
// Multiplies `base`'s forecast by (1 + e), e ~ Normal(0, sigma) truncated at
// -0.9, with sigma chosen so that E|e| = mape (e.g. 0.14). The draw for a
// given (seed, zone, issue step, lead) is always the same (the issue step:
// its index since the epoch at the series' step, the hour on hourly data).
std::shared_ptr<const Forecaster> noisy_forecaster(std::shared_ptr<const Forecaster> base,
                                                   double mape, std::uint64_t seed);

// By name: "perfect", "persistence", "seasonal24", "seasonal168", "blend",
// and "<name>+noise<pct>" (e.g. "perfect+noise14"). Throws listing the names.
std::shared_ptr<const Forecaster> make_forecaster(const std::string& spec, std::uint64_t seed = 1);

// The forecast as a series for a placement Region: `horizon` values at
// actual.step() from floor_to_step(now, actual.step()), zone = actual.zone().
IntensitySeries forecast_series(const Forecaster& f, const IntensitySeries& actual, Time now, int horizon);

struct ForecastAccuracy {
  std::string zone, forecaster;
  double mape = 0;          // mean |f - a| / a over counted points
  double mae = 0;           // gCO2/kWh
  long points = 0;          // (issue, lead) pairs counted
  long skipped_zero = 0;    // pairs with actual == 0 (MAPE undefined), not counted
};

// Issues a forecast every `stride_hours` from `from` (plus the history the
// forecaster needs) while the whole horizon fits before `to`, and scores
// leads 1..horizon against `actual`. horizon is in points at actual's step
// (hours on hourly data), as for forecast().
ForecastAccuracy evaluate_forecaster(const Forecaster& f, const IntensitySeries& actual, Time from, Time to,
                                     int horizon, int stride_hours = 1);

}  // namespace carbon
