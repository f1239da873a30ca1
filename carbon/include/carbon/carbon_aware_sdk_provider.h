// Green Software Foundation Carbon Aware SDK WebAPI client.
//
//   GET {base}/emissions/bylocations?location=Z&time=ISO&toTime=ISO
//     -> [{"location":"Z","time":"ISO","rating":123.4,"duration":"01:00:00"}, ...]
//     (rating = gCO2eq/kWh; duration "hh:mm:ss" or "d.hh:mm:ss")
//   GET {base}/emissions/forecasts/current?location=Z&dataStartAt=ISO&dataEndAt=ISO
//     -> [{"generatedAt":"ISO","location":"Z",
//          "optimalDataPoints":[{"location":"Z","timestamp":"ISO","duration":5,"value":1.2}],
//          "forecastData":[{"location":"Z","timestamp":"ISO","duration":5,"value":1.2}, ...]}]
//     (duration in minutes; the older singular "optimalDataPoint": {...} is accepted too)
// The series' step is HttpOptions::resolution: by default points at
// sub-hour resolution are averaged per UTC hour; with a resolution of 5, 15
// or 30 minutes they are kept at that step (finer points averaged per step,
// coarser ones held over it), so 5-minute WattTime data can stay 5-minute.
// The points' own step is validated first: 5, 15, 30 or 60 minutes on the
// UTC grid and never mixed, else kMalformed naming the first bad timestamp.
// A missing step is a kGap error. See provider.h for the error contract.
#pragma once

#include "carbon/http_options.h"
#include "carbon/provider.h"

namespace carbon {

class CarbonAwareSdkProvider : public IntensityProvider {
 public:
  explicit CarbonAwareSdkProvider(HttpOptions options);
  std::string name() const override { return "carbon-aware-sdk"; }
  Reading current(const std::string& zone, Time now) override;
  IntensitySeries history(const std::string& zone, Time from, Time to) override;
  Forecast forecast(const std::string& zone, Time now, Hours horizon) override;

 private:
  HttpOptions options_;
};

}  // namespace carbon
