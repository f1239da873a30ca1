#include "carbon/forecast.h"

#include "carbon/error.h"

#include <cmath>
#include <functional>

namespace carbon {

namespace {

// Points per hour at the series' step (1 on hourly data).
long per_hour(const IntensitySeries& a) { return static_cast<long>(Seconds{Hours{1}} / a.step()); }

// Index of floor_to_step(now, step) in `a` (may equal a.size() when now is
// just past the end); throws when `need_hours` hours of history are not
// available, or the step is not a supported one on its grid.
long issue_index(const IntensitySeries& a, Time now, int need_hours, const std::string& who) {
  if (a.empty()) throw CarbonError(who + ": empty history");
  if (!is_supported_step(a.step()))
    throw CarbonError(who + ": " + a.zone() + " history is " + step_name(a.step()) +
                      " data (supported steps: 5, 15, 30 or 60 minutes)");
  if (floor_to_step(a.start(), a.step()) != a.start())
    throw CarbonError(who + ": " + a.zone() + " history starts at " + format_time(a.start()) + ", off its " +
                      step_name(a.step()) + " grid");
  const Time t0 = floor_to_step(now, a.step());
  long i = static_cast<long>((t0 - a.start()) / a.step());
  if (i - need_hours * per_hour(a) < 0 || i > static_cast<long>(a.size()))
    throw CarbonError(who + ": needs " + std::to_string(need_hours) + " h of " + a.zone() + " history before " +
                      format_time(t0) + " (series covers [" + format_time(a.start()) + ", " +
                      format_time(a.end()) + "))");
  return i;
}

// Value one or more seasons before target index t so that it lies before i.
double seasonal(const IntensitySeries& a, long i, long t, int season) {
  long m = (t - i) / season + 1;
  return a[static_cast<size_t>(t - m * season)];
}

class Persistence : public Forecaster {
 public:
  std::string name() const override { return "persistence"; }
  int history_hours() const override { return 1; }
  std::vector<double> forecast(const IntensitySeries& a, Time now, int horizon) const override {
    long i = issue_index(a, now, history_hours(), name());
    return std::vector<double>(static_cast<size_t>(horizon), a[static_cast<size_t>(i - 1)]);
  }
};

class SeasonalNaive : public Forecaster {
 public:
  explicit SeasonalNaive(int season) : season_(season) {
    if (season <= 0) throw CarbonError("seasonal forecaster: season must be > 0");
  }
  std::string name() const override { return "seasonal" + std::to_string(season_); }
  int history_hours() const override { return season_; }
  std::vector<double> forecast(const IntensitySeries& a, Time now, int horizon) const override {
    long i = issue_index(a, now, season_, name());
    const long season = season_ * per_hour(a);   // in points
    std::vector<double> out(static_cast<size_t>(horizon));
    for (int k = 0; k < horizon; ++k) out[k] = seasonal(a, i, i + k, season);
    return out;
  }

 private:
  int season_;
};

// Anomaly persistence over a seasonal profile:
//   profile(t) = g * (decay-weighted mean of the same hour on the last 7 days)
//              + (1 - g) * (same hour one week before)
//   f(t) = profile(t) + rho^(k+1) * (a[i-1] - profile(i-1))
// Parameters (decay 0.3, g 0.8, rho 0.9) were picked on the 2023 data of
// the 16 shipped zones (in-sample; see docs/carbon.md).
class Blend : public Forecaster {
 public:
  std::string name() const override { return "blend"; }
  int history_hours() const override { return 168 + 24; }
  std::vector<double> forecast(const IntensitySeries& a, Time now, int horizon) const override {
    long i = issue_index(a, now, history_hours(), name());
    const long n = per_hour(a), day = 24 * n, week = 168 * n;   // in points
    double w[7], wsum = 0;
    for (int d = 0; d < 7; ++d) wsum += (w[d] = std::pow(kDecay, d));
    auto profile = [&](long t) {
      // Same time of day on the latest day before i (for t = i - 1: the day before).
      long base = t < i ? t - day : t - ((t - i) / day + 1) * day;
      double daily = 0;
      for (int d = 0; d < 7; ++d) daily += w[d] * a[static_cast<size_t>(base - day * d)];
      daily /= wsum;
      long wb = t < i ? t - week : t - ((t - i) / week + 1) * week;
      return kDaily * daily + (1 - kDaily) * a[static_cast<size_t>(wb)];
    };
    double anomaly = a[static_cast<size_t>(i - 1)] - profile(i - 1);
    std::vector<double> out(static_cast<size_t>(horizon));
    // The anomaly decays by rho per hour of lead: rho^(k / n + 1) for point k.
    double r = kRho;
    for (int k = 0; k < horizon; ++k) {
      out[k] = std::max(0.0, profile(i + k) + r * anomaly);
      if ((k + 1) % n == 0) r *= kRho;
    }
    return out;
  }

 private:
  static constexpr double kDecay = 0.3;
  static constexpr double kDaily = 0.8;
  static constexpr double kRho = 0.9;
};

class Perfect : public Forecaster {
 public:
  std::string name() const override { return "perfect"; }
  int history_hours() const override { return 0; }
  std::vector<double> forecast(const IntensitySeries& a, Time now, int horizon) const override {
    long i = issue_index(a, now, 0, name());
    if (i + horizon > static_cast<long>(a.size()))
      throw CarbonError("perfect forecaster: " + a.zone() + " is recorded until " + format_time(a.end()) + ", asked up to " +
                        format_time(floor_to_step(now, a.step()) + a.step() * horizon));
    return std::vector<double>(a.values().begin() + i, a.values().begin() + i + horizon);
  }
};

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Noisy : public Forecaster {
 public:
  Noisy(std::shared_ptr<const Forecaster> base, double mape, std::uint64_t seed)
      : base_(std::move(base)), mape_(mape), seed_(seed), sigma_(mape * std::sqrt(M_PI / 2)) {
    if (!base_) throw CarbonError("noisy forecaster: no base forecaster");
    if (!(mape >= 0 && mape < 1)) throw CarbonError("noisy forecaster: error level must be in [0, 1)");
  }
  std::string name() const override {
    return base_->name() + "+noise" + std::to_string(static_cast<int>(std::lround(mape_ * 100)));
  }
  int history_hours() const override { return base_->history_hours(); }
  std::vector<double> forecast(const IntensitySeries& a, Time now, int horizon) const override {
    auto out = base_->forecast(a, now, horizon);
    std::uint64_t z = std::hash<std::string>{}(a.zone());
    // The issue step's index since the epoch (its hour on hourly data).
    std::int64_t issue = to_unix(floor_to_step(now, a.step())) / a.step().count();
    for (int k = 0; k < horizon; ++k) {
      std::uint64_t h = splitmix(seed_ ^ splitmix(z ^ splitmix(static_cast<std::uint64_t>(issue) * 1000003ull + k)));
      double u1 = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;
      double u2 = (static_cast<double>(splitmix(h) >> 11) + 0.5) / 9007199254740992.0;
      double e = sigma_ * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      out[k] *= 1 + std::max(-0.9, e);
    }
    return out;
  }

 private:
  std::shared_ptr<const Forecaster> base_;
  double mape_;
  std::uint64_t seed_;
  double sigma_;
};

}  // namespace

std::shared_ptr<const Forecaster> persistence_forecaster() { return std::make_shared<Persistence>(); }
std::shared_ptr<const Forecaster> seasonal_naive_forecaster(int season_hours) {
  return std::make_shared<SeasonalNaive>(season_hours);
}
std::shared_ptr<const Forecaster> blend_forecaster() { return std::make_shared<Blend>(); }
std::shared_ptr<const Forecaster> perfect_forecaster() { return std::make_shared<Perfect>(); }
std::shared_ptr<const Forecaster> noisy_forecaster(std::shared_ptr<const Forecaster> base, double mape,
                                                   std::uint64_t seed) {
  return std::make_shared<Noisy>(std::move(base), mape, seed);
}

std::shared_ptr<const Forecaster> make_forecaster(const std::string& spec, std::uint64_t seed) {
  auto plus = spec.find("+noise");
  std::string base = plus == std::string::npos ? spec : spec.substr(0, plus);
  std::shared_ptr<const Forecaster> f;
  if (base == "perfect") f = perfect_forecaster();
  else if (base == "persistence") f = persistence_forecaster();
  else if (base == "seasonal24") f = seasonal_naive_forecaster(24);
  else if (base == "seasonal168") f = seasonal_naive_forecaster(168);
  else if (base == "blend") f = blend_forecaster();
  else
    throw CarbonError("unknown forecaster '" + spec +
                      "' (known: perfect, persistence, seasonal24, seasonal168, blend, <name>+noise<pct>)");
  if (plus != std::string::npos) {
    std::string pct = spec.substr(plus + 6);
    char* end = nullptr;
    double v = std::strtod(pct.c_str(), &end);
    if (pct.empty() || *end != '\0' || !(v >= 0 && v < 100))
      throw CarbonError("forecaster '" + spec + "': noise level must be a percentage in [0, 100)");
    f = noisy_forecaster(f, v / 100.0, seed);
  }
  return f;
}

IntensitySeries forecast_series(const Forecaster& f, const IntensitySeries& actual, Time now, int horizon) {
  if (horizon <= 0) throw CarbonError("forecast_series: horizon must be > 0");
  return IntensitySeries(actual.zone(), floor_to_step(now, actual.step()), actual.step(),
                         f.forecast(actual, now, horizon));
}

ForecastAccuracy evaluate_forecaster(const Forecaster& f, const IntensitySeries& actual, Time from, Time to, int horizon,
                                     int stride_hours) {
  if (horizon <= 0 || stride_hours <= 0) throw CarbonError("evaluate_forecaster: horizon and stride must be > 0");
  ForecastAccuracy acc;
  acc.zone = actual.zone();
  acc.forecaster = f.name();
  const Seconds step = actual.step();
  Time first = std::max(ceil_to_step(from, step), actual.start()) + Hours{f.history_hours()};
  Time last = std::min(to, actual.end());
  double ape = 0, ae = 0;
  for (Time t = first; t + step * horizon <= last; t += Hours{stride_hours}) {
    auto fc = f.forecast(actual, t, horizon);
    size_t i = actual.index_of(t);
    for (int k = 0; k < horizon; ++k) {
      double a = actual[i + k];
      double err = std::fabs(fc[k] - a);
      ae += err;
      if (a > 0) {
        ape += err / a;
        ++acc.points;
      } else {
        ++acc.skipped_zero;
      }
    }
  }
  if (acc.points == 0) throw CarbonError("evaluate_forecaster: no forecast fits in the period for " + actual.zone());
  acc.mape = ape / acc.points;
  acc.mae = ae / (acc.points + acc.skipped_zero);
  return acc;
}

}  // namespace carbon
