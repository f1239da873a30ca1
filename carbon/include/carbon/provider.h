// IntensityProvider: one interface over every source of grid intensity
// (recorded CSV files, the Carbon Aware SDK WebAPI, the Electricity Maps API).
//
// Contracts shared by every implementation:
//  * Times are UTC; `now` is always passed in (no wall-clock reads).
//  * A value is never invented: missing data, HTTP failures, timeouts and
//    malformed answers throw ProviderError with a kind and a message naming
//    the provider, zone and cause. The only way to get an old value is the
//    explicit StaleFallbackProvider, which marks it `stale`.
#pragma once

#include "carbon/error.h"
#include "carbon/intensity.h"
#include "carbon/time.h"

#include <string>
#include <vector>

namespace carbon {

// The intensity in force at a moment.
struct Reading {
  std::string zone;
  Time time;                 // the time the value is for (start of its step)
  double gco2_per_kwh = 0;
  bool estimated = false;    // modelled by the source
  bool stale = false;        // older than the provider's max_age, or a fallback
  std::string source;        // provider name; a fallback says why here
};

// A forecast: a series at the provider's step (hourly unless configured
// for 5, 15 or 30 minutes) starting at the step of `now` or later.
struct Forecast {
  IntensitySeries series;
  Time generated_at{};                 // as reported by the source (or `now`)
  // Optional optimal window(s) the source recommends (Carbon Aware SDK).
  std::vector<IntensitySample> optimal;
};

class IntensityProvider {
 public:
  virtual ~IntensityProvider() = default;
  virtual std::string name() const = 0;

  // The value in force at `now`. Throws ProviderError (kNoData, kStale when
  // the newest point is too old, or a transport/format kind).
  virtual Reading current(const std::string& zone, Time now) = 0;

  // History covering [from, to) at the provider's step (hourly by default;
  // a CSV recording's own step). Throws ProviderError(kGap) when any step
  // is missing, kNoData when nothing is available.
  virtual IntensitySeries history(const std::string& zone, Time from, Time to) = 0;

  // A forecast for the next `horizon` from `now`. Throws ProviderError when
  // the source has none.
  virtual Forecast forecast(const std::string& zone, Time now, Hours horizon) = 0;
};

}  // namespace carbon
