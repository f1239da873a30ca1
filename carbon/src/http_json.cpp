#include "http_json.h"

#include "carbon/http_client.h"
#include "carbon/http_failure.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace carbon::detail {

using Kind = ProviderError::Kind;

nlohmann::json get_json(const HttpOptions& options, const std::string& path,
                        const std::multimap<std::string, std::string>& params,
                        const std::multimap<std::string, std::string>& headers, const std::string& who) {
  // base_url is scheme://host[:port] and a path prefix.
  if (options.base_url.empty()) throw ProviderError(Kind::kNoData, who + ": no base URL configured");
  HttpUrl url;
  try {
    url = split_http_url(options.base_url);
  } catch (const std::invalid_argument& e) {
    throw ProviderError(Kind::kNoData, who + " GET " + path + ": invalid base URL " + e.what());
  }
  std::string prefix = url.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::string full = prefix + path;
  std::string what = who + " GET " + full;

  HttpClientOptions client_options;
  client_options.base_url = url.base;
  client_options.connect_timeout = options.connect_timeout;
  client_options.read_timeout = options.read_timeout;
  client_options.write_timeout = options.read_timeout;
  httplib::Client cli = [&] {
    try {
      return make_http_client(client_options);
    } catch (const std::invalid_argument& e) {
      throw ProviderError(Kind::kNoData, what + ": invalid base URL " + e.what());
    }
  }();
  httplib::Params p(params.begin(), params.end());
  httplib::Headers h(headers.begin(), headers.end());
  h.emplace("Accept", "application/json");
  const auto sent = std::chrono::steady_clock::now();
  auto res = cli.Get(full, p, h);
  if (!res)
    throw ProviderError(Kind::kTimeout, what + ": " + explain_http_failure(res, cli, client_options, sent).cause +
                                            " (connect timeout " + std::to_string(options.connect_timeout.count()) +
                                            " ms, read timeout " + std::to_string(options.read_timeout.count()) + " ms)");
  if (res->status < 200 || res->status > 299) {
    std::string body = res->body.substr(0, 200);
    throw ProviderError(Kind::kHttp, what + ": HTTP " + std::to_string(res->status) + (body.empty() ? "" : ": " + body));
  }
  try {
    return nlohmann::json::parse(res->body);
  } catch (const nlohmann::json::exception& e) {
    throw ProviderError(Kind::kMalformed, what + ": body is not JSON (" + e.what() + ")");
  }
}

double number_member(const nlohmann::json& obj, const char* key, const std::string& who) {
  if (!obj.is_object()) throw ProviderError(Kind::kMalformed, who + ": expected an object, got " + obj.dump().substr(0, 80));
  auto it = obj.find(key);
  if (it == obj.end()) throw ProviderError(Kind::kMalformed, who + ": missing '" + key + "' in " + obj.dump().substr(0, 120));
  if (it->is_null()) throw ProviderError(Kind::kGap, who + ": '" + key + "' is null in " + obj.dump().substr(0, 120));
  if (!it->is_number())
    throw ProviderError(Kind::kMalformed, who + ": '" + key + "' is not a number in " + obj.dump().substr(0, 120));
  double v = it->get<double>();
  if (!std::isfinite(v) || v < 0)
    throw ProviderError(Kind::kMalformed, who + ": '" + key + "' = " + std::to_string(v) + " is not a valid intensity");
  return v;
}

Time time_member(const nlohmann::json& obj, const char* key, const std::string& who) {
  if (!obj.is_object()) throw ProviderError(Kind::kMalformed, who + ": expected an object, got " + obj.dump().substr(0, 80));
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    throw ProviderError(Kind::kMalformed, who + ": missing or non-string '" + key + "' in " + obj.dump().substr(0, 120));
  Time t;
  if (!parse_time(it->get<std::string>(), &t))
    throw ProviderError(Kind::kMalformed, who + ": unparseable '" + key + "' = '" + it->get<std::string>() + "'");
  return t;
}

IntensitySeries regular_series(const std::string& zone, const std::vector<IntensitySample>& points, const std::string& who,
                               Seconds step) {
  if (points.empty()) throw ProviderError(Kind::kNoData, who + ": no data points for " + zone);
  std::vector<IntensitySample> pts = points;
  std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.time < b.time; });
  Seconds native;
  try {
    native = IntensitySeries::detect_step(zone, pts);
  } catch (const CarbonError& e) {
    throw ProviderError(Kind::kMalformed, who + ": " + e.what());
  }
  // Coarser points: each holds for `native`, i.e. for native/step steps.
  if (native > step) {
    std::vector<IntensitySample> fine;
    fine.reserve(pts.size() * static_cast<size_t>(native / step));
    for (const auto& p : pts)
      for (Time t = p.time; t < p.time + native; t += step) fine.push_back({t, p.gco2_per_kwh, p.estimated});
    pts = std::move(fine);
  }
  std::map<Time, std::pair<double, int>> buckets;
  std::map<Time, bool> estimated;
  for (const auto& p : pts) {
    Time b0 = floor_to_step(p.time, step);
    auto& b = buckets[b0];
    b.first += p.gco2_per_kwh;
    b.second += 1;
    estimated[b0] = estimated[b0] || p.estimated;
  }
  std::vector<IntensitySample> out;
  for (auto& [t, b] : buckets) {
    if (!out.empty() && t - out.back().time != step)
      throw ProviderError(Kind::kGap, who + ": " + zone + " has no data for " + format_time(out.back().time + step) +
                                          " .. " + format_time(t - step));
    out.push_back({t, b.first / b.second, estimated[t]});
  }
  return IntensitySeries::from_samples(zone, out, step);
}

IntensitySeries forecast_series(const std::string& zone, const nlohmann::json& points,
                                const std::function<IntensitySample(const nlohmann::json&, const std::string&)>& point,
                                Time now, Seconds step, Hours horizon, const std::string& who) {
  const Time t0 = floor_to_step(now, step);
  std::vector<IntensitySample> pts;
  for (const auto& e : points) {
    auto p = point(e, who);
    if (p.time >= floor_hour(now) && p.time < t0 + horizon) pts.push_back(p);
  }
  if (pts.empty()) throw ProviderError(Kind::kNoData, who + ": no forecast points after " + format_time(now));
  IntensitySeries s = regular_series(zone, pts, who, step);
  if (s.end() <= t0) throw ProviderError(Kind::kNoData, who + ": no forecast points after " + format_time(now));
  return s.slice(t0, t0 + horizon);
}

IntensitySeries hourly_series(const std::string& zone, const std::vector<IntensitySample>& points, const std::string& who) {
  return regular_series(zone, points, who, Hours{1});
}

void check_resolution(const HttpOptions& options, const std::string& provider) {
  if (!is_supported_step(options.resolution))
    throw CarbonError(provider + ": resolution of " + std::to_string(options.resolution.count()) +
                      " s is not supported (5, 15, 30 or 60 minutes)");
}

}  // namespace carbon::detail
