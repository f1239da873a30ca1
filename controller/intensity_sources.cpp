// Intensity sources of the carbon source file (config_files.h) on carbon/'s
// providers, and carbon/'s hardware profile names. Built only with carbon/.
#include <carbon/carbon_aware_sdk_provider.h>
#include <carbon/catalog.h>
#include <carbon/electricitymaps_provider.h>
#include <carbon/hardware.h>
#include <carbon/stale_fallback_provider.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "controller/config_files.h"

namespace controller {

namespace {

constexpr int64_t kHourMs = 3600 * 1000;

int64_t floor_hour_ms(int64_t ms) { return (ms >= 0 ? ms / kHourMs : (ms - kHourMs + 1) / kHourMs) * kHourMs; }

// source: file -- the catalog's series replayed at the same hour of the year.
class ReplaySource final : public IntensitySource {
 public:
  explicit ReplaySource(carbon::Catalog catalog) : catalog_(std::move(catalog)) {}

  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    const std::string id = catalog_.resolve(zone);  // throws naming the known zones
    const carbon::IntensitySeries& s = catalog_.series(id);
    const int64_t n = int64_t(s.size());
    const int64_t start_h = carbon::to_unix(s.start()) / 3600;
    const int64_t h0 = floor_hour_ms(now_ms);
    std::vector<ForecastPoint> out;
    for (int h = 0; h <= horizon_h; ++h) {
      const int64_t t = h0 + h * kHourMs;
      const int64_t idx = ((t / kHourMs - start_h) % n + n) % n;
      out.push_back({t, s[size_t(idx)]});
    }
    return out;
  }

 private:
  carbon::Catalog catalog_;
};

// carbon-aware-sdk / electricitymaps: "now" through a StaleFallbackProvider,
// the forecast from the provider, both cached per zone for refresh_seconds.
class LiveSource final : public IntensitySource {
 public:
  LiveSource(std::shared_ptr<carbon::IntensityProvider> provider, const CarbonSourceConfig& c)
      : provider_(std::move(provider)),
        fallback_(std::make_shared<carbon::StaleFallbackProvider>(provider_, carbon::Seconds{c.max_stale_seconds})),
        what_("carbon source " + c.origin + " (" + c.source + " " + c.url + ")"),
        refresh_ms_(int64_t(c.refresh_seconds) * 1000),
        horizon_h_(c.forecast_horizon_hours) {}

  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    std::lock_guard<std::mutex> l(mu_);
    Entry& e = cache_[zone];
    // A zone with no data at all is retried sooner than a refresh.
    const int64_t period = e.points.empty() ? std::min<int64_t>(refresh_ms_, 30000) : refresh_ms_;
    if (!e.fetched || now_ms - e.fetched_ms >= period || now_ms < e.fetched_ms) refresh(zone, now_ms, e);
    if (e.points.empty()) throw std::runtime_error(what_ + ": zone " + zone + ": " + e.error);
    const int64_t h0 = floor_hour_ms(now_ms);
    std::vector<ForecastPoint> out;
    double in_force = e.points.front().gco2_per_kwh;
    for (const auto& p : e.points)
      if (p.time_ms <= now_ms) in_force = p.gco2_per_kwh;
    out.push_back({h0, in_force});
    for (const auto& p : e.points)
      if (p.time_ms > h0 && p.time_ms <= h0 + int64_t(horizon_h) * kHourMs) out.push_back(p);
    return out;
  }

 private:
  struct Entry {
    bool fetched = false;
    int64_t fetched_ms = 0;
    std::vector<ForecastPoint> points;  // ascending: [hour of the fetch: now], forecast hours after it
    std::string error;
  };

  void refresh(const std::string& zone, int64_t now_ms, Entry& e) const {
    const carbon::Time now = carbon::from_unix(now_ms / 1000);
    const int64_t h0 = floor_hour_ms(now_ms);
    e.fetched = true;
    e.fetched_ms = now_ms;
    std::optional<double> now_value;
    std::string err;
    try {
      carbon::Reading r = fallback_->current(zone, now);
      now_value = r.gco2_per_kwh;
      if (r.stale) std::fprintf(stderr, "greenshard-controller: %s: zone %s: using %s\n", what_.c_str(), zone.c_str(), r.source.c_str());
    } catch (const std::exception& ex) {
      err = std::string("current: ") + ex.what();
    }
    std::vector<ForecastPoint> future;
    try {
      carbon::Forecast f = provider_->forecast(zone, now, carbon::Hours{horizon_h_});
      const int64_t step_ms = int64_t(f.series.step().count()) * 1000;
      const int64_t start_ms = carbon::to_unix(f.series.start()) * 1000;
      for (size_t i = 0; i < f.series.size(); ++i) {
        const int64_t t = start_ms + int64_t(i) * step_ms;
        if (t == h0 && !now_value) now_value = f.series[i];  // the source's own value for this hour
        if (t > h0) future.push_back({t, f.series[i]});
      }
    } catch (const std::exception& ex) {
      err += std::string(err.empty() ? "" : "; ") + "forecast: " + ex.what();
      for (const auto& p : e.points)  // keep the future hours of the last forecast
        if (p.time_ms > h0) future.push_back(p);
    }
    if (!err.empty())
      std::fprintf(stderr, "greenshard-controller: %s: zone %s: %s\n", what_.c_str(), zone.c_str(), err.c_str());
    e.points.clear();
    if (!now_value) {
      e.error = err.empty() ? "no value for now" : err;
      return;
    }
    e.error.clear();
    e.points.push_back({h0, *now_value});
    e.points.insert(e.points.end(), future.begin(), future.end());
  }

  std::shared_ptr<carbon::IntensityProvider> provider_;
  std::shared_ptr<carbon::StaleFallbackProvider> fallback_;
  std::string what_;
  int64_t refresh_ms_;
  int horizon_h_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Entry> cache_;
};

}  // namespace

std::unique_ptr<IntensitySource> make_intensity_source(const CarbonSourceConfig& c) {
  if (c.source == "file") {
    try {
      carbon::Catalog cat = c.data_dir.empty() ? carbon::Catalog::load() : carbon::Catalog::load(c.data_dir);
      return std::make_unique<ReplaySource>(std::move(cat));
    } catch (const std::exception& e) {
      throw std::runtime_error(c.origin + ": data_dir: " + (c.data_dir.empty() ? "(shipped data)" : c.data_dir) +
                               ": " + e.what());
    }
  }
  carbon::HttpOptions http;
  http.base_url = c.url;
  while (http.base_url.size() > 1 && http.base_url.back() == '/') http.base_url.pop_back();
  std::shared_ptr<carbon::IntensityProvider> p;
  if (c.source == "carbon-aware-sdk") p = std::make_shared<carbon::CarbonAwareSdkProvider>(http);
  else if (c.source == "electricitymaps") p = std::make_shared<carbon::ElectricityMapsProvider>(http, c.api_key);
  else throw std::runtime_error(c.origin + ": source: unknown '" + c.source + "'");
  return std::make_unique<LiveSource>(std::move(p), c);
}

std::vector<std::string> known_hardware_profiles() {
  std::vector<std::string> out;
  for (const auto& h : carbon::builtin_hardware_profiles()) out.push_back(h.name);
  return out;
}

}  // namespace controller
