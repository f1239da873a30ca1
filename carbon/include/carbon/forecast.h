// Forecasters over an hourly history.
//
// Contract: forecast(actual, now, horizon) returns `horizon` hourly values
// for the hours starting at floor_hour(now). Every forecaster except
// PerfectForecaster reads only values strictly before floor_hour(now); each
// needs some history (persistence 1 h, seasonal-24 24 h, seasonal-168 and
// blend 168 h) and throws CarbonError when it is missing. Pure functions of
// their arguments (the noise injector is seeded, not random).
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
  // Hours of history needed before floor_hour(now).
  virtual int history_hours() const = 0;
  virtual std::vector<double> forecast(const IntensitySeries& actual, Time now, int horizon) const = 0;
};

// The last observed hour, repeated.
std::shared_ptr<const Forecaster> persistence_forecaster();
// The value one season (24 h or 168 h) before each target hour; for leads
// beyond a season, repeated seasonally.
std::shared_ptr<const Forecaster> seasonal_naive_forecaster(int season_hours);
// "blend": persistence decaying into a level-adjusted daily profile (mean of
// the same hour over the last 7 days, rescaled by last-24 h level), with a
// weekly term. Beats both naive models on the 2023 data (see bench).
std::shared_ptr<const Forecaster> blend_forecaster();
// The actual future (simulation only). Throws when it is not recorded.
std::shared_ptr<const Forecaster> perfect_forecaster();
// Multiplies `base`'s forecast by (1 + e), e ~ Normal(0, sigma) truncated at
// -0.9, with sigma chosen so that E|e| = mape (e.g. 0.14). The draw for a
// given (seed, zone, issue hour, target hour) is always the same.
std::shared_ptr<const Forecaster> noisy_forecaster(std::shared_ptr<const Forecaster> base,
                                                   double mape, std::uint64_t seed);

// By name: "perfect", "persistence", "seasonal24", "seasonal168", "blend",
// and "<name>+noise<pct>" (e.g. "perfect+noise14"). Throws listing the names.
std::shared_ptr<const Forecaster> make_forecaster(const std::string& spec, std::uint64_t seed = 1);

// The forecast as a series for a placement Region: `horizon` hourly values
// from floor_hour(now), zone = actual.zone().
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
// leads 1..horizon against `actual`.
ForecastAccuracy evaluate_forecaster(const Forecaster& f, const IntensitySeries& actual, Time from, Time to,
                                     int horizon, int stride_hours = 1);

}  // namespace carbon
