#include "carbon/catalog.h"
#include "carbon/error.h"
#include "carbon/forecast.h"

#include <gtest/gtest.h>

#include <cmath>

namespace carbon {
namespace {

const Time kT0 = parse_time("2023-01-01T00:00Z");

// 15 days of a known pattern: value = 100 + hour + 1000 * (day % 7 == 3).
IntensitySeries pattern() {
  std::vector<double> v;
  for (int h = 0; h < 15 * 24; ++h) v.push_back(100 + h % 24 + ((h / 24) % 7 == 3 ? 1000 : 0));
  return IntensitySeries("P", kT0, Hours{1}, v);
}

TEST(Forecast, PersistenceRepeatsTheLastHour) {
  auto s = pattern();
  auto f = persistence_forecaster()->forecast(s, kT0 + Hours{50} + std::chrono::minutes{20}, 3);
  EXPECT_EQ(f, (std::vector<double>{s[49], s[49], s[49]}));
}

TEST(Forecast, SeasonalNaiveRepeatsTheSeason) {
  auto s = pattern();
  Time now = kT0 + Hours{10 * 24};
  auto d = seasonal_naive_forecaster(24)->forecast(s, now, 30);
  for (int k = 0; k < 30; ++k) EXPECT_DOUBLE_EQ(d[k], s[10 * 24 + k - (k < 24 ? 24 : 48)]) << k;
  auto w = seasonal_naive_forecaster(168)->forecast(s, now, 48);
  for (int k = 0; k < 48; ++k) EXPECT_DOUBLE_EQ(w[k], s[10 * 24 + k]) << k;  // weekly pattern: exact
}

TEST(Forecast, PerfectReadsTheFutureAndStopsAtTheEnd) {
  auto s = pattern();
  EXPECT_EQ(perfect_forecaster()->forecast(s, kT0 + Hours{5}, 2), (std::vector<double>{s[5], s[6]}));
  EXPECT_THROW(perfect_forecaster()->forecast(s, kT0 + Hours{15 * 24 - 1}, 2), CarbonError);
}

TEST(Forecast, MissingHistoryIsAnError) {
  auto s = pattern();
  EXPECT_THROW(seasonal_naive_forecaster(168)->forecast(s, kT0 + Hours{100}, 5), CarbonError);
  EXPECT_THROW(persistence_forecaster()->forecast(s, kT0, 5), CarbonError);
  EXPECT_THROW(make_forecaster("crystal-ball"), CarbonError);
  EXPECT_THROW(make_forecaster("perfect+noiseX"), CarbonError);
}

TEST(Forecast, NoiseInjectorHitsTheRequestedErrorAndIsRepeatable) {
  auto s = pattern();
  auto f = make_forecaster("perfect+noise14", 7);
  EXPECT_EQ(f->name(), "perfect+noise14");
  auto acc = evaluate_forecaster(*f, s, kT0, s.end(), 24, 1);
  EXPECT_NEAR(acc.mape, 0.14, 0.01);
  EXPECT_EQ(f->forecast(s, kT0 + Hours{30}, 24), f->forecast(s, kT0 + Hours{30}, 24));
  EXPECT_NE(f->forecast(s, kT0 + Hours{30}, 24), make_forecaster("perfect+noise14", 8)->forecast(s, kT0 + Hours{30}, 24));
  EXPECT_DOUBLE_EQ(evaluate_forecaster(*perfect_forecaster(), s, kT0, s.end(), 24).mape, 0.0);
}

TEST(Forecast, EvaluationSkipsZeroActualsForMape) {
  IntensitySeries z("Z", kT0, Hours{1}, {10, 0, 10, 10});
  auto acc = evaluate_forecaster(*persistence_forecaster(), z, kT0, z.end(), 1, 1);
  EXPECT_EQ(acc.skipped_zero, 1);
  EXPECT_EQ(acc.points, 2);   // issues at 01 (target 0 -> skipped), 02, 03
  EXPECT_DOUBLE_EQ(acc.mape, 0.5);  // |0-10|/10 and |10-10|/10
}

TEST(Forecast, BlendBeatsBothNaiveModelsOnRealData) {
  auto cat = Catalog::load(builtin_data_dir(), {"GB", "DE", "US-CAL-CISO"});
  for (const auto& zone : cat.ids()) {
    const auto& s = cat.series(zone);
    Time from = s.start(), to = s.end();
    double blend = evaluate_forecaster(*blend_forecaster(), s, from, to, 24, 5).mape;
    double d = evaluate_forecaster(*seasonal_naive_forecaster(24), s, from, to, 24, 5).mape;
    double p = evaluate_forecaster(*persistence_forecaster(), s, from, to, 24, 5).mape;
    EXPECT_LT(blend, d) << zone;
    EXPECT_LT(blend, p) << zone;
  }
}

}  // namespace
}  // namespace carbon

namespace carbon {
namespace {

TEST(Forecast, SeriesForPlacementStartsAtTheHourOfNow) {
  auto s = pattern();
  auto f = forecast_series(*seasonal_naive_forecaster(24), s, kT0 + Hours{30} + std::chrono::minutes{5}, 6);
  EXPECT_EQ(f.start(), kT0 + Hours{30});
  EXPECT_EQ(f.size(), 6u);
  EXPECT_EQ(f.zone(), "P");
  EXPECT_DOUBLE_EQ(f[0], s[6]);
}

}  // namespace
}  // namespace carbon

namespace carbon {
namespace {

using std::chrono::minutes;

// 15 days at 30 minutes: a daily shape where the two halves of an hour
// differ, plus 1000 on the fourth day of each week.
IntensitySeries half_hourly_pattern() {
  std::vector<double> v;
  for (int i = 0; i < 15 * 48; ++i) v.push_back(100 + 2 * (i % 48) + (i % 2 ? 7 : 0) + ((i / 48) % 7 == 3 ? 1000 : 0));
  return IntensitySeries("H", kT0, minutes{30}, v);
}

// Each value of `s` repeated k times, at s.step() / k.
IntensitySeries repeated(const IntensitySeries& s, int k) {
  std::vector<double> v;
  for (double x : s.values()) v.insert(v.end(), size_t(k), x);
  return IntensitySeries(s.zone(), s.start(), s.step() / k, v);
}

TEST(ForecastSubHourly, PersistenceRepeatsTheLastHalfHour) {
  auto s = half_hourly_pattern();
  // now 50:40 is in the half hour 50:30 (point 101): the last one before it is 100.
  auto f = persistence_forecaster()->forecast(s, kT0 + Hours{50} + minutes{40}, 3);
  EXPECT_EQ(f, (std::vector<double>{s[100], s[100], s[100]}));
  auto series = forecast_series(*persistence_forecaster(), s, kT0 + Hours{50} + minutes{40}, 3);
  EXPECT_EQ(series.step(), minutes{30});
  EXPECT_EQ(series.start(), kT0 + Hours{50} + minutes{30});
  EXPECT_EQ(series.size(), 3u);
  // History is counted in time: one hour is two points.
  EXPECT_THROW(persistence_forecaster()->forecast(s, kT0 + minutes{30}, 1), CarbonError);
  EXPECT_EQ(persistence_forecaster()->forecast(s, kT0 + Hours{1}, 1), std::vector<double>{s[1]});
}

TEST(ForecastSubHourly, SeasonalNaiveLooksBackADayOrAWeekInPoints) {
  auto s = half_hourly_pattern();
  const Time now = kT0 + Hours{10 * 24} + minutes{30};   // point 481
  auto d = seasonal_naive_forecaster(24)->forecast(s, now, 60);
  for (int k = 0; k < 60; ++k) EXPECT_EQ(d[k], s[481 + k - (k < 48 ? 48 : 96)]) << k;
  auto w = seasonal_naive_forecaster(168)->forecast(s, now, 96);
  for (int k = 0; k < 96; ++k) EXPECT_EQ(w[k], s[481 + k]) << k;   // weekly pattern: exact
  EXPECT_THROW(seasonal_naive_forecaster(168)->forecast(s, kT0 + Hours{167}, 1), CarbonError);
}

TEST(ForecastSubHourly, BlendFollowsTheHalfHourlyDailyShape) {
  // A shape repeated every day (no weekly term, no anomaly): blend returns it,
  // which needs its daily profile at 48 points per day.
  std::vector<double> v;
  for (int i = 0; i < 10 * 48; ++i) v.push_back(200 + 3 * (i % 48) + (i % 2 ? 40 : 0));
  IntensitySeries s("D", kT0, minutes{30}, v);
  const Time now = kT0 + Hours{8 * 24} + minutes{30};   // point 385
  auto f = blend_forecaster()->forecast(s, now, 60);
  for (int k = 0; k < 60; ++k) EXPECT_NEAR(f[k], v[size_t(385 + k) % 48], 1e-9) << k;
  EXPECT_THROW(blend_forecaster()->forecast(s, kT0 + Hours{191}, 1), CarbonError);   // needs 192 h
}

// The strong check: an hourly series with each value repeated twice gets,
// issued on the hour, each hourly forecast value twice -- for every
// forecaster, bit for bit -- and the same evaluation.
TEST(ForecastSubHourly, RepeatingAnHourlySeriesRepeatsItsForecast) {
  auto cat = Catalog::load(builtin_data_dir(), {"GB"});
  const auto hourly = cat.series("GB").slice(parse_time("2023-03-01T00:00Z"), parse_time("2023-04-01T00:00Z"));
  for (int k : {2, 4, 12}) {
    const auto fine = repeated(hourly, k);
    SCOPED_TRACE(step_name(fine.step()));
    for (const std::string spec : {"persistence", "seasonal24", "seasonal168", "blend", "perfect"}) {
      auto f = make_forecaster(spec);
      for (Time now : {parse_time("2023-03-10T00:00Z"), parse_time("2023-03-17T13:00Z")}) {
        auto h = forecast_series(*f, hourly, now, 30);
        auto q = forecast_series(*f, fine, now + minutes{1}, 30 * k);
        ASSERT_EQ(q.size(), h.size() * size_t(k)) << spec;
        EXPECT_EQ(q.start(), h.start()) << spec;
        EXPECT_EQ(q.step(), fine.step()) << spec;
        for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i], h[i / size_t(k)]) << spec << " point " << i;
      }
    }
    const auto eh = evaluate_forecaster(*blend_forecaster(), hourly, hourly.start(), hourly.end(), 24, 5);
    const auto ef = evaluate_forecaster(*blend_forecaster(), fine, fine.start(), fine.end(), 24 * k, 5);
    EXPECT_EQ(ef.points, eh.points * k);
    EXPECT_EQ(ef.skipped_zero, eh.skipped_zero * k);
    EXPECT_NEAR(ef.mape, eh.mape, 1e-12);
    EXPECT_NEAR(ef.mae, eh.mae, 1e-9);
  }
}

TEST(ForecastSubHourly, AnUnsupportedStepOrAnOffGridSeriesIsRefused) {
  IntensitySeries twenty("T", kT0, minutes{20}, std::vector<double>(24 * 3, 1.0));
  try {
    persistence_forecaster()->forecast(twenty, kT0 + Hours{2}, 1);
    FAIL();
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find("T history is 20-minute data (supported steps: 5, 15, 30 or 60 minutes)"),
              std::string::npos)
        << e.what();
  }
  IntensitySeries shifted("S", kT0 + minutes{10}, minutes{30}, std::vector<double>(24, 1.0));
  EXPECT_THROW(persistence_forecaster()->forecast(shifted, kT0 + Hours{3}, 1), CarbonError);
}

}  // namespace
}  // namespace carbon
