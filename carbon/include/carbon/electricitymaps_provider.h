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
//   GET {base}/v3/carbon-intensity/past-range?zone=Z&start=ISO&end=ISO
//     -> {"zone":"Z","data":[{"carbonIntensity":123,"datetime":"ISO",
//                             "isEstimated":false, ...}, ...]}
//      (hourly; at most 10 days a request)
// history(zone, from, to) asks /history first (no wall-clock read decides
// what "the last 24 h" is); when the range starts before that answer, it
// asks /past-range in consecutive chunks of at most 10 days
// (start = hour of `from`, end = the next chunk's start or the hour after
// `to`), keeping each chunk's points in [start, end).
// A null carbonIntensity or a missing hour is a kGap error; history() throws
// kNoData when the range is after the newest /history point or no point of
// it comes back, kGap when /past-range leaves hours of it out.
// Sub-hourly (HttpOptions::resolution of 5, 15 or 30 minutes): every
// request above adds temporalGranularity=5_minutes (resolution 5 min) or
// 15_minutes (15 and 30 min; 30 averages pairs), /past-range chunks hold at
// most kPastRangeMaxPoints points (240 x 5 or 15 minutes), and the series
// keeps the finer step instead of averaging it per hour; an answer at a
// coarser step than asked (a plan without sub-hourly data) is held over the
// finer steps. Points at a step other than 5/15/30/60 minutes, off their
// UTC grid or with steps mixed are kMalformed, naming the first bad
// timestamp. The default (hourly) sends exactly the requests above.
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
  static constexpr Hours kPastRangeMaxHours{240};   // /past-range, hourly: 10 days a request
  static constexpr int kPastRangeMaxPoints = 240;   // any granularity: 240 points a request
  Forecast forecast(const std::string& zone, Time now, Hours horizon) override;

 private:
  HttpOptions options_;
  std::string token_;
};

}  // namespace carbon
