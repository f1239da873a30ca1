#include "carbon/electricitymaps_provider.h"

#include "http_json.h"

namespace carbon {

using Kind = ProviderError::Kind;
using nlohmann::json;

ElectricityMapsProvider::ElectricityMapsProvider(HttpOptions options, std::string auth_token)
    : options_(std::move(options)), token_(std::move(auth_token)) {}

namespace {

IntensitySample point(const json& e, const std::string& who) {
  IntensitySample s{detail::time_member(e, "datetime", who), detail::number_member(e, "carbonIntensity", who), false};
  if (auto it = e.find("isEstimated"); it != e.end() && it->is_boolean()) s.estimated = it->get<bool>();
  return s;
}

const json& array_member(const json& body, const char* key, const std::string& who) {
  if (!body.is_object()) throw ProviderError(Kind::kMalformed, who + ": expected a JSON object");
  auto it = body.find(key);
  if (it == body.end() || !it->is_array()) throw ProviderError(Kind::kMalformed, who + ": missing '" + key + "' array");
  return *it;
}

}  // namespace

Reading ElectricityMapsProvider::current(const std::string& zone, Time now) {
  std::string who = name() + " current(" + zone + ")";
  auto body = detail::get_json(options_, "/v3/carbon-intensity/latest", {{"zone", zone}}, {{"auth-token", token_}}, who);
  auto p = point(body, who);
  if (options_.max_age.count() > 0 && now - p.time > options_.max_age)
    throw ProviderError(Kind::kStale, who + ": newest point " + format_time(p.time) + " is older than " +
                                          std::to_string(options_.max_age.count()) + " s at " + format_time(now));
  Reading r;
  r.zone = zone;
  r.time = p.time;
  r.gco2_per_kwh = p.gco2_per_kwh;
  r.estimated = p.estimated;
  r.source = name();
  return r;
}

IntensitySeries ElectricityMapsProvider::history(const std::string& zone, Time from, Time to) {
  std::string who = name() + " history(" + zone + ")";
  auto body = detail::get_json(options_, "/v3/carbon-intensity/history", {{"zone", zone}}, {{"auth-token", token_}}, who);
  std::vector<IntensitySample> pts;
  for (const auto& e : array_member(body, "history", who)) pts.push_back(point(e, who));
  auto s = detail::hourly_series(zone, pts, who);
  if (!s.covers(floor_hour(from), ceil_hour(to)))
    throw ProviderError(Kind::kNoData, who + ": answer covers [" + format_time(s.start()) + ", " + format_time(s.end()) +
                                           "), requested [" + format_time(from) + ", " + format_time(to) + ")");
  return s.slice(from, to);
}

Forecast ElectricityMapsProvider::forecast(const std::string& zone, Time now, Hours horizon) {
  std::string who = name() + " forecast(" + zone + ")";
  auto body = detail::get_json(options_, "/v3/carbon-intensity/forecast", {{"zone", zone}}, {{"auth-token", token_}}, who);
  std::vector<IntensitySample> pts;
  for (const auto& e : array_member(body, "forecast", who)) {
    auto p = point(e, who);
    if (p.time >= floor_hour(now) && p.time < floor_hour(now) + horizon) pts.push_back(p);
  }
  if (pts.empty()) throw ProviderError(Kind::kNoData, who + ": no forecast points after " + format_time(now));
  Forecast f;
  f.series = detail::hourly_series(zone, pts, who);
  f.generated_at = body.contains("updatedAt") ? detail::time_member(body, "updatedAt", who) : now;
  return f;
}

}  // namespace carbon
