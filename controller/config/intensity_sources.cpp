// Intensity sources of the carbon source file (config_files.h) on carbon/'s
// providers, and carbon/'s hardware profile names. Built only with carbon/.
#include <carbon/carbon_aware_sdk_provider.h>
#include <carbon/catalog.h>
#include <carbon/electricitymaps_provider.h>
#include <carbon/hardware.h>
#include <carbon/stale_fallback_provider.h>

#include <carbon/forecast.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "controller/config/intensity_sources.h"

#include "carbon/time_ms.h"

namespace controller {

namespace {

using carbon::floor_hour_ms;
using carbon::hours_of_ms;
using carbon::kHourMs;

bool sees_future(const carbon::Forecaster& f) { return f.name().rfind("perfect", 0) == 0; }

// source: file (config_files.h, make_file_intensity_source): the catalog's
// series laid end to end, every recorded step at its own time. Positions in
// the replayed timeline are steps since the epoch at the zone's step (hours
// on hourly data).
class FileSource final : public IntensitySource {
 public:
  FileSource(carbon::Catalog catalog, std::shared_ptr<const carbon::Forecaster> f)
      : catalog_(std::move(catalog)), f_(std::move(f)), future_(sees_future(*f_)) {}

  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    if (horizon_h < 0) throw std::runtime_error("forecast: horizon_h must be >= 0");
    const carbon::IntensitySeries& s = series(zone);
    const int64_t step_s = s.step().count(), step_ms = step_s * carbon::kSecondMs;
    const int64_t i0 = carbon::floor_div(now_ms, step_ms);  // the step of now, since the epoch
    // Points from the step of now through the hour horizon_h after this one
    // (horizon_h + 1 on hourly data).
    const int n_out = int(((hours_of_ms(now_ms) + horizon_h + 1) * kHourMs - i0 * step_ms) / step_ms);
    // The forecaster gets the history it needs before i0 and, only when it is
    // allowed to read the future (perfect*, replay), the steps it forecasts.
    const int64_t from = i0 - int64_t(f_->history_hours()) * (3600 / step_s);
    const int64_t to = future_ ? i0 + n_out : i0;
    std::vector<double> v;
    v.reserve(size_t(to - from));
    for (int64_t i = from; i < to; ++i) v.push_back(replayed(s, i));
    std::vector<double> fc;
    try {
      carbon::IntensitySeries window(s.zone(), carbon::from_unix(from * step_s), s.step(), std::move(v));
      carbon::IntensitySeries out = carbon::forecast_series(*f_, window, carbon::from_unix(i0 * step_s), n_out);
      fc = out.values();
    } catch (const std::exception& e) {
      throw std::runtime_error("zone " + zone + ": forecaster " + f_->name() + ": " + e.what());
    }
    std::vector<ForecastPoint> pts;
    pts.reserve(fc.size());
    for (size_t k = 0; k < fc.size(); ++k) pts.push_back({(i0 + int64_t(k)) * step_ms, fc[k]});
    return pts;
  }

  double current(const std::string& zone, int64_t now_ms) const override {
    const carbon::IntensitySeries& s = series(zone);
    return replayed(s, carbon::floor_div(now_ms, s.step().count() * carbon::kSecondMs));
  }

 private:
  const carbon::IntensitySeries& series(const std::string& zone) const {
    const carbon::IntensitySeries& s = catalog_.series(catalog_.resolve(zone));  // throws naming the known zones
    if (!carbon::is_supported_step(s.step()) || carbon::floor_to_step(s.start(), s.step()) != s.start())
      throw std::runtime_error("zone " + zone + ": the recorded series is not 5-, 15-, 30- or 60-minute on its grid");
    return s;
  }
  // The value of step i (steps since the epoch at the series' step) in the
  // replayed timeline.
  static double replayed(const carbon::IntensitySeries& s, int64_t i) {
    const int64_t n = int64_t(s.size());
    const int64_t start_i = carbon::to_unix(s.start()) / s.step().count();
    return s[size_t(((i - start_i) % n + n) % n)];
  }

  carbon::Catalog catalog_;
  std::shared_ptr<const carbon::Forecaster> f_;
  bool future_;
};

// Records the forecasts a source issues (the first call in each hour, at
// leads kLeads) and scores them against the value in force (current()) once
// their hour has passed: MAPE over the last kWindow scored forecasts per zone
// and lead. Memory per zone: at most 25 pending target hours and kWindow
// errors per lead.
class TrackedSource final : public IntensitySource {
 public:
  static constexpr int kLeads[] = {1, 6, 24};
  static constexpr size_t kWindow = 168;

  TrackedSource(std::unique_ptr<IntensitySource> inner, std::string forecaster)
      : inner_(std::move(inner)), forecaster_(std::move(forecaster)) {}

  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    std::vector<ForecastPoint> pts = inner_->forecast(zone, now_ms, horizon_h);
    std::optional<double> now_value;
    try {
      now_value = inner_->current(zone, now_ms);
    } catch (const std::exception&) {
    }
    record(zone, now_ms, pts, now_value);
    return pts;
  }

  double current(const std::string& zone, int64_t now_ms) const override { return inner_->current(zone, now_ms); }

  std::vector<Stats> stats() const override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<Stats> out;
    for (const auto& [zone, z] : zones_) {
      Stats st;
      st.zone = zone;
      st.forecaster = forecaster_;
      for (size_t i = 0; i < std::size(kLeads); ++i) {
        const auto& w = z.errors[i];
        double sum = 0;
        for (double e : w) sum += e;
        st.leads.push_back({kLeads[i], w.empty() ? std::nan("") : sum / double(w.size()), long(w.size())});
      }
      out.push_back(std::move(st));
    }
    return out;
  }

 private:
  struct Zone {
    int64_t issued_h = std::numeric_limits<int64_t>::min();
    std::map<int64_t, std::vector<std::pair<size_t, double>>> pending;  // target hour -> (lead index, forecast)
    std::map<int64_t, double> observed;  // pending target hour -> last value in force seen in it
    std::deque<double> errors[std::size(kLeads)];  // |f - a| / a, newest last
  };

  void record(const std::string& zone, int64_t now_ms, const std::vector<ForecastPoint>& pts,
              std::optional<double> now_value) const {
    const int64_t h = hours_of_ms(now_ms);
    std::lock_guard<std::mutex> l(mu_);
    Zone& z = zones_[zone];
    if (h < z.issued_h) {  // the clock went back: start over
      z.pending.clear();
      z.observed.clear();
      z.issued_h = std::numeric_limits<int64_t>::min();
    }
    // The value in force at a target hour's start: sub-hourly points (file
    // source) change within the hour, so only calls in the hour's first step
    // (the first point is the hour's own) observe it; hourly ones always.
    if (now_value && z.pending.count(h) && !pts.empty() && pts.front().time_ms == h * kHourMs)
      z.observed[h] = *now_value;
    // Hours that have passed: score what was forecast for them.
    while (!z.pending.empty() && z.pending.begin()->first < h) {
      const int64_t t = z.pending.begin()->first;
      auto a = z.observed.find(t);
      if (a != z.observed.end() && a->second > 0)  // MAPE is undefined for an actual of 0
        for (const auto& [lead, f] : z.pending.begin()->second) {
          auto& w = z.errors[lead];
          w.push_back(std::abs(f - a->second) / a->second);
          if (w.size() > kWindow) w.pop_front();
        }
      z.pending.erase(z.pending.begin());
      if (a != z.observed.end()) z.observed.erase(a);
    }
    if (h == z.issued_h) return;
    z.issued_h = h;
    for (size_t i = 0; i < std::size(kLeads); ++i) {
      const int64_t target = (h + kLeads[i]) * kHourMs;
      for (const auto& p : pts)
        if (p.time_ms == target) z.pending[h + kLeads[i]].push_back({i, p.gco2_per_kwh});
    }
  }

  std::unique_ptr<IntensitySource> inner_;
  std::string forecaster_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Zone> zones_;
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
    const carbon::Time now = carbon::time_of_ms(now_ms);
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

std::unique_ptr<IntensitySource> make_file_intensity_source(carbon::Catalog catalog,
                                                            std::shared_ptr<const carbon::Forecaster> forecaster) {
  if (!forecaster) throw std::runtime_error("make_file_intensity_source: no forecaster");
  std::string name = forecaster->name();
  return std::make_unique<TrackedSource>(std::make_unique<FileSource>(std::move(catalog), std::move(forecaster)),
                                         std::move(name));
}

std::unique_ptr<IntensitySource> make_carbon_intensity_source() {
  return make_file_intensity_source(carbon::Catalog::load(), carbon::make_forecaster(CarbonSourceConfig{}.forecaster));
}

std::string forecaster_spec_error(const std::string& spec) {
  try {
    carbon::make_forecaster(spec);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::unique_ptr<IntensitySource> make_intensity_source(const CarbonSourceConfig& c) {
  if (c.source == "file") {
    std::shared_ptr<const carbon::Forecaster> f;
    try {
      f = carbon::make_forecaster(c.forecaster);
    } catch (const std::exception& e) {
      throw std::runtime_error(c.origin + ": forecaster: " + e.what());
    }
    if (sees_future(*f) && !c.replay)
      throw std::runtime_error(c.origin + ": forecaster: '" + c.forecaster +
                               "' uses the recorded future; allowed only with replay: true");
    try {
      carbon::Catalog cat = c.data_dir.empty() ? carbon::Catalog::load() : carbon::Catalog::load(c.data_dir);
      return make_file_intensity_source(std::move(cat), std::move(f));
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
  return std::make_unique<TrackedSource>(std::make_unique<LiveSource>(std::move(p), c), c.source);
}

std::vector<std::string> known_hardware_profiles() {
  std::vector<std::string> out;
  for (const auto& h : carbon::builtin_hardware_profiles()) out.push_back(h.name);
  return out;
}

}  // namespace controller
