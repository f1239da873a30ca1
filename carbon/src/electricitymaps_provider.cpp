#include "carbon/electricitymaps_provider.h"

#include "http_json.h"

#include <algorithm>

namespace carbon {

using Kind = ProviderError::Kind;
using nlohmann::json;

ElectricityMapsProvider::ElectricityMapsProvider(HttpOptions options, std::string auth_token)
    : options_(std::move(options)), token_(std::move(auth_token)) {
  detail::check_resolution(options_, "electricitymaps");
}

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

// Query parameters: the zone, plus temporalGranularity when sub-hourly data
// is wanted (hourly requests stay as they always were).
std::multimap<std::string, std::string> query(const std::string& zone, Seconds resolution) {
  std::multimap<std::string, std::string> q{{"zone", zone}};
  if (resolution < Hours{1}) q.emplace("temporalGranularity", resolution == Seconds{300} ? "5_minutes" : "15_minutes");
  return q;
}

// The step of the points asked for: 5 or 15 minutes below an hour, else 60.
Seconds granularity(Seconds resolution) {
  return resolution >= Hours{1} ? Seconds{Hours{1}} : resolution == Seconds{300} ? Seconds{300} : Seconds{900};
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
  const Seconds step = options_.resolution;
  const Time h0 = floor_to_step(from, step), h1 = ceil_to_step(to, step);
  if (h1 <= h0) throw ProviderError(Kind::kNoData, who + ": empty range [" + format_time(from) + ", " + format_time(to) + ")");
  // The last 24 h first (one request); an older range from /past-range.
  auto body = detail::get_json(options_, "/v3/carbon-intensity/history", query(zone, step), {{"auth-token", token_}}, who);
  std::vector<IntensitySample> pts;
  for (const auto& e : array_member(body, "history", who)) pts.push_back(point(e, who));
  auto s = detail::regular_series(zone, pts, who, step);
  if (s.covers(h0, h1)) return s.slice(from, to);
  if (h0 >= s.start())
    throw ProviderError(Kind::kNoData, who + ": answer covers [" + format_time(s.start()) + ", " + format_time(s.end()) +
                                           "), requested [" + format_time(from) + ", " + format_time(to) + ")");
  // /past-range answers at most kPastRangeMaxPoints points a request (10
  // days of hourly points): ask in consecutive chunks [a, b) and keep only
  // the points inside each.
  std::string rwho = name() + " history(" + zone + ") past-range";
  const Seconds chunk = granularity(step) * kPastRangeMaxPoints;
  pts.clear();
  for (Time a = h0; a < h1;) {
    Time b = std::min(h1, a + chunk);
    auto q = query(zone, step);
    q.emplace("start", format_time(a));
    q.emplace("end", format_time(b));
    auto reply = detail::get_json(options_, "/v3/carbon-intensity/past-range", q, {{"auth-token", token_}}, rwho);
    for (const auto& e : array_member(reply, "data", rwho)) {
      auto p = point(e, rwho);
      if (p.time >= a && p.time < b) pts.push_back(p);
    }
    a = b;
  }
  if (pts.empty())
    throw ProviderError(Kind::kNoData, rwho + ": no points in [" + format_time(h0) + ", " + format_time(h1) + ")");
  auto r = detail::regular_series(zone, pts, rwho, step);
  if (!r.covers(h0, h1))
    throw ProviderError(Kind::kGap, rwho + ": answer covers [" + format_time(r.start()) + ", " + format_time(r.end()) +
                                        "), requested [" + format_time(from) + ", " + format_time(to) + ")");
  return r.slice(from, to);
}

Forecast ElectricityMapsProvider::forecast(const std::string& zone, Time now, Hours horizon) {
  std::string who = name() + " forecast(" + zone + ")";
  const Seconds step = options_.resolution;
  auto body =
      detail::get_json(options_, "/v3/carbon-intensity/forecast", query(zone, step), {{"auth-token", token_}}, who);
  Forecast f;
  f.series = detail::forecast_series(zone, array_member(body, "forecast", who), point, now, step, horizon, who);
  f.generated_at = body.contains("updatedAt") ? detail::time_member(body, "updatedAt", who) : now;
  return f;
}

}  // namespace carbon
