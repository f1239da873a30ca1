#include "carbon/carbon_aware_sdk_provider.h"

#include "http_json.h"

namespace carbon {

using Kind = ProviderError::Kind;
using nlohmann::json;

CarbonAwareSdkProvider::CarbonAwareSdkProvider(HttpOptions options) : options_(std::move(options)) {
  detail::check_resolution(options_, "carbon-aware-sdk");
}

namespace {

// [{"location","time","rating","duration"}] -> samples.
std::vector<IntensitySample> emissions_points(const json& body, const std::string& zone, const std::string& who) {
  if (!body.is_array()) throw ProviderError(Kind::kMalformed, who + ": expected a JSON array of emissions data");
  std::vector<IntensitySample> pts;
  for (const auto& e : body) {
    if (e.is_object() && e.contains("location") && e["location"].is_string() && e["location"] != zone) continue;
    pts.push_back({detail::time_member(e, "time", who), detail::number_member(e, "rating", who), false});
  }
  return pts;
}

// {"location","timestamp","duration","value"} -> sample.
IntensitySample forecast_point(const json& e, const std::string& who) {
  return {detail::time_member(e, "timestamp", who), detail::number_member(e, "value", who), false};
}

}  // namespace

Reading CarbonAwareSdkProvider::current(const std::string& zone, Time now) {
  std::string who = name() + " current(" + zone + ")";
  Seconds look_back = options_.max_age.count() > 0 ? options_.max_age : Seconds{Hours{24}};
  auto body = detail::get_json(options_, "/emissions/bylocations",
                               {{"location", zone}, {"time", format_time(now - look_back)}, {"toTime", format_time(now)}},
                               {}, who);
  auto pts = emissions_points(body, zone, who);
  const IntensitySample* best = nullptr;
  for (const auto& p : pts)
    if (p.time <= now && (!best || p.time > best->time)) best = &p;
  if (!best) throw ProviderError(Kind::kNoData, who + ": no data point at or before " + format_time(now));
  if (options_.max_age.count() > 0 && now - best->time > options_.max_age)
    throw ProviderError(Kind::kStale, who + ": newest point " + format_time(best->time) + " is older than " +
                                          std::to_string(options_.max_age.count()) + " s at " + format_time(now));
  Reading r;
  r.zone = zone;
  r.time = best->time;
  r.gco2_per_kwh = best->gco2_per_kwh;
  r.source = name();
  return r;
}

IntensitySeries CarbonAwareSdkProvider::history(const std::string& zone, Time from, Time to) {
  std::string who = name() + " history(" + zone + ")";
  auto body = detail::get_json(options_, "/emissions/bylocations",
                               {{"location", zone}, {"time", format_time(from)}, {"toTime", format_time(to)}}, {}, who);
  const Seconds step = options_.resolution;
  auto s = detail::regular_series(zone, emissions_points(body, zone, who), who, step);
  if (!s.covers(floor_to_step(from, step), ceil_to_step(to, step)))
    throw ProviderError(Kind::kGap, who + ": answer covers [" + format_time(s.start()) + ", " + format_time(s.end()) +
                                        "), requested [" + format_time(from) + ", " + format_time(to) + ")");
  return s.slice(from, to);
}

Forecast CarbonAwareSdkProvider::forecast(const std::string& zone, Time now, Hours horizon) {
  std::string who = name() + " forecast(" + zone + ")";
  auto body = detail::get_json(options_, "/emissions/forecasts/current",
                               {{"location", zone},
                                {"dataStartAt", format_time(now)},
                                {"dataEndAt", format_time(now + horizon)}},
                               {}, who);
  if (!body.is_array() || body.empty() || !body[0].is_object())
    throw ProviderError(Kind::kMalformed, who + ": expected a non-empty JSON array of forecasts");
  const json* fc = &body[0];
  for (const auto& f : body)
    if (f.is_object() && f.contains("location") && f["location"].is_string() && f["location"] == zone) fc = &f;
  auto data = fc->find("forecastData");
  if (data == fc->end() || !data->is_array())
    throw ProviderError(Kind::kMalformed, who + ": missing 'forecastData' array");
  Forecast f;
  f.series = detail::forecast_series(zone, *data, forecast_point, now, options_.resolution, horizon, who);
  f.generated_at = fc->contains("generatedAt") ? detail::time_member(*fc, "generatedAt", who) : now;
  if (auto o = fc->find("optimalDataPoints"); o != fc->end()) {
    if (!o->is_array()) throw ProviderError(Kind::kMalformed, who + ": 'optimalDataPoints' is not an array");
    for (const auto& e : *o) f.optimal.push_back(forecast_point(e, who));
  } else if (auto o1 = fc->find("optimalDataPoint"); o1 != fc->end() && !o1->is_null()) {
    f.optimal.push_back(forecast_point(*o1, who));   // older SDK versions
  }
  return f;
}

}  // namespace carbon
