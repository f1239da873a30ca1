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
