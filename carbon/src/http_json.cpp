#include "http_json.h"

#include <httplib.h>

#include <cmath>

namespace carbon::detail {

using Kind = ProviderError::Kind;

nlohmann::json get_json(const HttpOptions& options, const std::string& path,
                        const std::multimap<std::string, std::string>& params,
                        const std::multimap<std::string, std::string>& headers, const std::string& who) {
  // Split base_url into scheme://host[:port] and a path prefix.
  std::string base = options.base_url;
  if (base.empty()) throw ProviderError(Kind::kNoData, who + ": no base URL configured");
  auto scheme_end = base.find("://");
  size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  auto path_start = base.find('/', host_start);
  std::string host = path_start == std::string::npos ? base : base.substr(0, path_start);
  std::string prefix = path_start == std::string::npos ? "" : base.substr(path_start);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::string full = prefix + path;
  std::string what = who + " GET " + full;

  httplib::Client cli(host);
  if (!cli.is_valid()) throw ProviderError(Kind::kNoData, what + ": invalid base URL '" + base + "'");
  cli.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.connect_timeout));
  cli.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.read_timeout));
  cli.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(options.read_timeout));
  httplib::Params p(params.begin(), params.end());
  httplib::Headers h(headers.begin(), headers.end());
  h.emplace("Accept", "application/json");
  auto res = cli.Get(full, p, h);
  if (!res)
    throw ProviderError(Kind::kTimeout, what + ": " + httplib::to_string(res.error()) + " (connect timeout " +
                                            std::to_string(options.connect_timeout.count()) + " ms, read timeout " +
                                            std::to_string(options.read_timeout.count()) + " ms)");
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

IntensitySeries hourly_series(const std::string& zone, const std::vector<IntensitySample>& points, const std::string& who) {
  if (points.empty()) throw ProviderError(Kind::kNoData, who + ": no data points for " + zone);
  std::map<Time, std::pair<double, int>> buckets;
  std::map<Time, bool> estimated;
  for (const auto& p : points) {
    auto& b = buckets[floor_hour(p.time)];
    b.first += p.gco2_per_kwh;
    b.second += 1;
    estimated[floor_hour(p.time)] = estimated[floor_hour(p.time)] || p.estimated;
  }
  std::vector<IntensitySample> hourly;
  for (auto& [t, b] : buckets) {
    if (!hourly.empty() && t - hourly.back().time != Hours{1})
      throw ProviderError(Kind::kGap, who + ": " + zone + " has no data for " + format_time(hourly.back().time + Hours{1}) +
                                          " .. " + format_time(t - Hours{1}));
    hourly.push_back({t, b.first / b.second, estimated[t]});
  }
  return IntensitySeries::from_samples(zone, hourly);
}

}  // namespace carbon::detail
