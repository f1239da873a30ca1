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
// Points at sub-hour resolution are averaged per UTC hour; a missing hour is
// a kGap error. See provider.h for the error contract.
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
