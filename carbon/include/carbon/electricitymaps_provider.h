// Electricity Maps API v3 client (header "auth-token: <token>").
//
//   GET {base}/v3/carbon-intensity/latest?zone=Z
//     -> {"zone":"Z","carbonIntensity":123,"datetime":"ISO","updatedAt":"ISO",
//         "isEstimated":false, ...}
//   GET {base}/v3/carbon-intensity/history?zone=Z            (last 24 h)
//     -> {"zone":"Z","history":[{"carbonIntensity":123,"datetime":"ISO",
//                                "isEstimated":false, ...}, ...]}
//   GET {base}/v3/carbon-intensity/forecast?zone=Z
//     -> {"zone":"Z","forecast":[{"carbonIntensity":123,"datetime":"ISO"}, ...],
//         "updatedAt":"ISO"}
// A null carbonIntensity or a missing hour is a kGap error; history() throws
// kNoData when the requested range is not inside the answer.
#pragma once

#include "carbon/http_options.h"
#include "carbon/provider.h"

namespace carbon {

class ElectricityMapsProvider : public IntensityProvider {
 public:
  ElectricityMapsProvider(HttpOptions options, std::string auth_token);
  std::string name() const override { return "electricitymaps"; }
  Reading current(const std::string& zone, Time now) override;
  IntensitySeries history(const std::string& zone, Time from, Time to) override;
  Forecast forecast(const std::string& zone, Time now, Hours horizon) override;

 private:
  HttpOptions options_;
  std::string token_;
};

}  // namespace carbon
