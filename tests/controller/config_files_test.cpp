// The carbon source and hardware files (controller/config/config_files.h): parser
// tables; the files the real Helm chart renders (real helm, default values
// and ci/multi-region-gpu-values.yaml) through the controller's real parsers;
// and a real greenshard-controller whose Carbon Aware SDK source is an
// HTTP server in this test on loopback (it plays the SDK's WebAPI: no real
// SDK runs here), seen through GET /v1/regions and /metrics.
#include <carbon/catalog.h>
#include <carbon/csv_provider.h>
#include <carbon/forecast.h>
#include <carbon/hardware.h>
#include <gtest/gtest.h>

#include <carbon/time_ms.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "common/spawn.h"
#include "controller/core/api_types.h"
#include "controller/api/auth.h"
#include "controller/core/base64.h"
#include "controller/config/config_files.h"
#include "controller/config/intensity_sources.h"
#include "controller/scheduling/metrics.h"
#include "controller/core/region_snapshot.h"
#include "controller/config/regions.h"
#include "process.h"

using json = nlohmann::json;
using namespace controller;

namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// --- carbon source file ----------------------------------------------------

struct BadSource {
  const char* sentence;
  const char* yaml;
  const char* error;  // regex the message must match (after "<file>: ")
};

const BadSource kBadSources[] = {
    {"source is required", "refresh_seconds: 300\n", "^src.yaml: source: required"},
    {"an unknown source is named", "source: watttime\n", "^src.yaml: source: must be file, carbon-aware-sdk or electricitymaps, got 'watttime'"},
    {"an unknown key is named", "source: file\nrefresh: 3\n", "^src.yaml: unknown key 'refresh'"},
    {"refresh_seconds below 10 is refused", "source: file\nrefresh_seconds: 5\n", "^src.yaml: refresh_seconds: must be in \\[10, 86400\\], got 5"},
    {"refresh_seconds must be an integer", "source: file\nrefresh_seconds: soon\n", "^src.yaml: refresh_seconds: expected an integer"},
    {"forecast_horizon_hours above 168 is refused", "source: file\nforecast_horizon_hours: 169\n", "^src.yaml: forecast_horizon_hours: must be in \\[1, 168\\]"},
    {"max_stale_seconds below 0 is refused", "source: file\nmax_stale_seconds: -1\n", "^src.yaml: max_stale_seconds: must be in"},
    {"a relative data_dir is refused", "source: file\ndata_dir: data\n", "^src.yaml: data_dir: must be an absolute path"},
    {"url is not used by the file source", "source: file\nurl: http://x\n", "^src.yaml: url: not used by source file"},
    {"data_dir is not used by a live source", "source: carbon-aware-sdk\nurl: http://x\ndata_dir: /d\n", "^src.yaml: data_dir: not used by source carbon-aware-sdk"},
    {"a live source needs a url", "source: carbon-aware-sdk\n", "^src.yaml: url: required for source carbon-aware-sdk"},
    {"a url without http(s) is refused", "source: carbon-aware-sdk\nurl: ftp://x\n", "^src.yaml: url: must be http\\(s\\)://"},
    {"a url without a host is refused", "source: carbon-aware-sdk\nurl: http://\n", "^src.yaml: url: must be http\\(s\\)://"},
    {"electricitymaps needs an api_key_file", "source: electricitymaps\nurl: https://api.electricitymap.org\n", "^src.yaml: api_key_file: required for source electricitymaps"},
    {"electricitymaps' key file must exist", "source: electricitymaps\nurl: https://e\napi_key_file: /nonexistent/key\n", "^src.yaml: api_key_file: '/nonexistent/key': cannot read"},
    {"the top level must be a map", "- source: file\n", "^src.yaml: expected a map at the top level"},
    {"source must be a string", "source: [file]\n", "^src.yaml: source: expected a string"},
    {"perfect forecasts need replay", "source: file\nforecaster: perfect\n", "^src.yaml: forecaster: 'perfect' uses the recorded future.*replay: true"},
    {"perfect with noise needs replay too", "source: file\nforecaster: perfect+noise14\nreplay: false\n", "^src.yaml: forecaster: 'perfect\\+noise14' uses the recorded future"},
    {"an unknown forecaster is named with the known ones", "source: file\nforecaster: oracle\n", "^src.yaml: forecaster: unknown forecaster 'oracle' \\(known: perfect, persistence"},
    {"replay must be true or false", "source: file\nreplay: maybe\n", "^src.yaml: replay: expected true or false"},
    {"a live source forecasts itself", "source: carbon-aware-sdk\nurl: http://x\nforecaster: blend\n", "^src.yaml: forecaster: not used by source carbon-aware-sdk"},
    {"replay is for the file source", "source: carbon-aware-sdk\nurl: http://x\nreplay: true\n", "^src.yaml: replay: not used by source carbon-aware-sdk"},
    // Found by fuzz_controller_config: a key that is not a string escaped as a
    // bare yaml-cpp "bad conversion" that named neither file nor key.
    {"a key must be a string", "source: file\n? [a]\n: 1\n", "^src.yaml: a key: expected a string"},
};

class BadCarbonSource : public ::testing::TestWithParam<BadSource> {};

TEST_P(BadCarbonSource, IsRefusedNamingTheField) {
  const BadSource& c = GetParam();
  try {
    parse_carbon_source_yaml(c.yaml, "src.yaml");
    FAIL() << "accepted:\n" << c.yaml;
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(std::regex_search(e.what(), std::regex(c.error))) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadCarbonSource, ::testing::ValuesIn(kBadSources),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(CarbonSourceFile, ElectricityMapsKeyIsReadTrimmedAndAnEmptyOneRefused) {
  gstest::TempDir dir;
  write(dir.file("key"), "  secret-key-123\n");
  auto c = parse_carbon_source_yaml("source: electricitymaps\nurl: https://e.example\napi_key_file: " + dir.file("key") +
                                        "\nrefresh_seconds: 600\nforecast_horizon_hours: 24\nmax_stale_seconds: 60\n",
                                    "src.yaml");
  EXPECT_EQ(c.source, "electricitymaps");
  EXPECT_EQ(c.api_key, "secret-key-123");
  EXPECT_EQ(c.refresh_seconds, 600);
  EXPECT_EQ(c.forecast_horizon_hours, 24);
  EXPECT_EQ(c.max_stale_seconds, 60);
  write(dir.file("empty"), "\n");
  EXPECT_THROW(
      {
        try {
          parse_carbon_source_yaml("source: electricitymaps\nurl: https://e\napi_key_file: " + dir.file("empty"), "s");
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("api_key_file: '" + dir.file("empty") + "' is empty"), std::string::npos)
              << e.what();
          throw;
        }
      },
      std::runtime_error);
  // The Carbon Aware SDK needs no key: a key file that is not there is fine.
  auto sdk = parse_carbon_source_yaml("source: carbon-aware-sdk\nurl: http://sdk:8080\napi_key_file: /nonexistent/k\n", "s");
  EXPECT_EQ(sdk.api_key, "");
}

TEST(CarbonSourceFile, FileSourceReplaysTheShippedDataAndNamesAnUnknownZone) {
  auto c = parse_carbon_source_yaml("source: file\ndata_dir: \"\"\n", "src.yaml");
  auto src = make_intensity_source(c);
  ASSERT_NE(src, nullptr);
  const int64_t now = 1767225600000 + 5 * carbon::kHourMs + 1234;  // 2026-01-01T05:00:01.234Z
  auto pts = src->forecast("DE", now, 48);
  ASSERT_EQ(pts.size(), 49u);
  EXPECT_EQ(pts.front().time_ms, 1767225600000 + 5 * carbon::kHourMs);
  // The same hour of the shipped year: the built-in replay gives the same values.
  auto builtin = make_carbon_intensity_source()->forecast("DE", now, 48);
  for (size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(pts[i].gco2_per_kwh, builtin[i].gco2_per_kwh) << i;
  EXPECT_THROW(src->forecast("ATLANTIS", now, 1), std::exception);
  // A data_dir that does not hold the data is named.
  auto bad = parse_carbon_source_yaml("source: file\ndata_dir: /nonexistent/carbon\n", "src.yaml");
  try {
    make_intensity_source(bad);
    FAIL() << "accepted a missing data_dir";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("src.yaml: data_dir: /nonexistent/carbon"), std::string::npos) << e.what();
  }
}

// --- forecasts of the file source -------------------------------------------

constexpr int64_t kH = carbon::kHourMs;

double metric(const std::string& text, const std::string& series);  // below

// A data directory (carbon/catalog.h layout) of one zone "XX" holding 2021,
// hourly: a daily and a weekly wave. `alter_from` >= 0: every hour from that
// index on is changed (the "future" of a test's now).
std::string synthetic_data(const gstest::TempDir& dir, const std::string& name, long alter_from = -1) {
  const std::string root = dir.file(name);
  write(root + "/zones.csv", "zone,alias,name,continent,estimated_hours,note\nXX,,Test zone,Europe,0,\n");
  std::vector<double> v(8760);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = 300 + 120 * std::sin(2 * M_PI * double(i % 24) / 24) + 40 * std::sin(2 * M_PI * double(i % 168) / 168) +
           double(i % 7);
    if (alter_from >= 0 && long(i) >= alter_from) v[i] = 3 * v[i] + 50;
  }
  std::filesystem::create_directories(root + "/2021");
  carbon::write_intensity_csv(root + "/2021/XX.csv",
                              carbon::IntensitySeries("XX", carbon::parse_time("2021-01-01T00:00Z"), carbon::Hours{1}, v));
  return root;
}

const int64_t k2021 = 1609459200000;  // 2021-01-01T00:00Z

TEST(FileIntensitySource, TheForecasterNeverSeesTheFutureUnlessReplayIsAsked) {
  gstest::TempDir dir;
  const long hour = 1000;  // now: 17 minutes into hour 1000 of the recording
  const int64_t now = k2021 + hour * kH + 17 * 60 * 1000;
  carbon::Catalog real = carbon::Catalog::load(synthetic_data(dir, "real"));
  carbon::Catalog altered = carbon::Catalog::load(synthetic_data(dir, "altered", hour));
  const carbon::IntensitySeries& actual = real.series("XX");
  ASSERT_NE(actual[size_t(hour)], altered.series("XX")[size_t(hour)]);

  // blend (the default): the same forecast whatever the future holds.
  auto blend = carbon::make_forecaster("blend");
  auto a = make_file_intensity_source(real, blend)->forecast("XX", now, 48);
  auto b = make_file_intensity_source(altered, blend)->forecast("XX", now, 48);
  ASSERT_EQ(a.size(), 49u);
  ASSERT_EQ(b.size(), 49u);
  const auto fs = carbon::forecast_series(*blend, actual, carbon::from_unix(now / 1000), 49);
  bool differs_from_actual = false;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].time_ms, k2021 + (hour + long(k)) * kH) << k;
    EXPECT_EQ(a[k].gco2_per_kwh, b[k].gco2_per_kwh) << "lead " << k << ": the forecaster saw the future";
    EXPECT_EQ(a[k].gco2_per_kwh, fs[k]) << "lead " << k << ": carbon::forecast_series on the recording";
    differs_from_actual |= a[k].gco2_per_kwh != actual[size_t(hour) + k];
  }
  EXPECT_TRUE(differs_from_actual) << "a forecast, not the recorded future";
  // The value in force is the recorded one (not a forecast).
  EXPECT_EQ(make_file_intensity_source(altered, blend)->current("XX", now), altered.series("XX")[size_t(hour)]);

  // perfect (replay only): the recorded future, so the altered one differs.
  auto perfect = carbon::make_forecaster("perfect");
  auto pa = make_file_intensity_source(real, perfect)->forecast("XX", now, 48);
  auto pb = make_file_intensity_source(altered, perfect)->forecast("XX", now, 48);
  ASSERT_EQ(pa.size(), 49u);
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_EQ(pa[k].gco2_per_kwh, actual[size_t(hour) + k]) << k;
    EXPECT_EQ(pb[k].gco2_per_kwh, altered.series("XX")[size_t(hour) + k]) << k;
  }

  // Outside the recording the same hour of it is replayed, at the real times.
  const int64_t later = now + 5 * 8760 * kH;
  auto r = make_file_intensity_source(real, blend)->forecast("XX", later, 48);
  ASSERT_EQ(r.size(), 49u);
  for (size_t k = 0; k < r.size(); ++k) {
    EXPECT_EQ(r[k].time_ms, a[k].time_ms + 5 * 8760 * kH) << k;
    EXPECT_EQ(r[k].gco2_per_kwh, a[k].gco2_per_kwh) << k;
  }
  EXPECT_THROW(make_file_intensity_source(real, nullptr), std::runtime_error);
}

TEST(FileIntensitySource, TheCarbonSourceFileNamesTheForecasterAndOnlyReplayMayUsePerfect) {
  gstest::TempDir dir;
  const std::string data = synthetic_data(dir, "data");
  const int64_t now = k2021 + 500 * kH;
  const carbon::Catalog cat = carbon::Catalog::load(data);
  // The default is blend.
  auto c = parse_carbon_source_yaml("source: file\ndata_dir: " + data + "\n", "src.yaml");
  EXPECT_EQ(c.forecaster, "blend");
  EXPECT_FALSE(c.replay);
  auto src = make_intensity_source(c);
  ASSERT_EQ(src->stats().size(), 0u) << "nothing forecast yet";
  auto fc = src->forecast("XX", now, 24);
  const auto blend = carbon::forecast_series(*carbon::make_forecaster("blend"), cat.series("XX"), carbon::from_unix(now / 1000), 25);
  for (size_t k = 0; k < fc.size(); ++k) EXPECT_EQ(fc[k].gco2_per_kwh, blend[k]) << k;
  ASSERT_EQ(src->stats().size(), 1u);
  EXPECT_EQ(src->stats()[0].forecaster, "blend");
  // A named forecaster.
  auto p = make_intensity_source(parse_carbon_source_yaml("source: file\nforecaster: persistence\ndata_dir: " + data, "s"));
  for (const auto& pt : p->forecast("XX", now, 5)) EXPECT_EQ(pt.gco2_per_kwh, cat.series("XX")[499]);
  // perfect with replay: true gives the recorded future.
  auto r = make_intensity_source(parse_carbon_source_yaml("source: file\nforecaster: perfect\nreplay: true\ndata_dir: " + data, "s"));
  auto rf = r->forecast("XX", now, 5);
  for (size_t k = 0; k < rf.size(); ++k) EXPECT_EQ(rf[k].gco2_per_kwh, cat.series("XX")[500 + k]) << k;
  // A configuration built in code is checked as well.
  CarbonSourceConfig bad = c;
  bad.forecaster = "perfect";
  try {
    make_intensity_source(bad);
    FAIL() << "perfect without replay";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("src.yaml: forecaster: 'perfect' uses the recorded future"), std::string::npos)
        << e.what();
  }
}

TEST(FileIntensitySource, ForecastErrorIsScoredAgainstTheActualOnceTheHourHasPassed) {
  gstest::TempDir dir;
  const carbon::Catalog cat = carbon::Catalog::load(synthetic_data(dir, "data"));
  const carbon::IntensitySeries& v = cat.series("XX");
  auto src = make_file_intensity_source(cat, carbon::make_forecaster("persistence"));
  const long h0 = 400;
  for (long h = h0; h <= h0 + 30; ++h) {
    src->forecast("XX", k2021 + h * kH + 60 * 1000, 48);  // issued at the first call of the hour
    src->forecast("XX", k2021 + h * kH + 59 * 60 * 1000, 48);
  }
  // Persistence issued at h forecasts v[h - 1] for every lead; target hours
  // up to h0 + 29 have passed (h0 + 30 is the hour now).
  auto expected = [&](int lead) {
    double sum = 0;
    long n = 0;
    for (long h = h0; h + lead <= h0 + 29; ++h, ++n) sum += std::abs(v[h - 1] - v[h + lead]) / v[h + lead];
    return std::pair{sum / double(n), n};
  };
  auto st = src->stats();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].zone, "XX");
  EXPECT_EQ(st[0].forecaster, "persistence");
  ASSERT_EQ(st[0].leads.size(), 3u);
  for (const auto& l : st[0].leads) {
    auto [mape, n] = expected(l.lead_h);
    EXPECT_EQ(l.points, n) << l.lead_h;
    EXPECT_NEAR(l.mape, mape, 1e-12) << l.lead_h;
    EXPECT_GT(l.mape, 0.01) << "persistence is not perfect";
  }
  // On the metrics: the forecaster and its error per region.
  Metrics m;
  RegionConfig r;
  r.name = "test-region";
  r.zone = "XX";
  m.set_forecast_stats({r}, *src);
  const std::string text = m.render();
  EXPECT_EQ(metric(text, "greenshard_forecast_info{forecaster=\"persistence\",region=\"test-region\",zone=\"XX\"}"), 1);
  EXPECT_NEAR(metric(text, "greenshard_forecast_mape_ratio{lead=\"24h\",region=\"test-region\"}"), expected(24).first, 1e-6);
  EXPECT_EQ(metric(text, "greenshard_forecast_scored{lead=\"1h\",region=\"test-region\"}"), double(expected(1).second));
  // Named as promtool wants (real promtool).
  write(dir.file("metrics.txt"), text);
  auto lint = gstest::run_process({"/bin/sh", "-c", "promtool check metrics < " + dir.file("metrics.txt")}, {},
                                  std::chrono::seconds(60));
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

// A 30-minute recording is served at its step: points from the half hour of
// now through the hour horizon_h after this one, the forecaster given the
// half-hour history (carbon::forecast_series at 30 minutes), current() the
// half hour in force, replayed outside the recording; the snapshot's step
// is read from its points.
TEST(FileIntensitySource, ThirtyMinuteDataIsServedAtItsStep) {
  gstest::TempDir dir;
  const std::string root = dir.file("half");
  write(root + "/zones.csv", "zone,alias,name,continent,estimated_hours,note\nXX,,Test zone,Europe,0,\n");
  std::vector<double> v(48 * 60);  // 60 days
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 300 + 100 * std::sin(2 * M_PI * double(i % 48) / 48) + (i % 2 ? 35 : 0) + double(i % 5);
  std::filesystem::create_directories(root + "/2021");
  carbon::write_intensity_csv(root + "/2021/XX.csv", carbon::IntensitySeries("XX", carbon::parse_time("2021-01-01T00:00Z"),
                                                                             std::chrono::minutes{30}, v));
  const carbon::Catalog cat = carbon::Catalog::load(root);
  const carbon::IntensitySeries& s = cat.series("XX");
  ASSERT_EQ(s.step(), std::chrono::minutes{30});
  const int64_t kHalf = kH / 2;
  const long half = 1000;  // an hour's first half (1000 is even)
  const int64_t now = k2021 + half * kHalf + 10 * 60 * 1000;

  auto persistence = make_file_intensity_source(cat, carbon::make_forecaster("persistence"));
  auto p = persistence->forecast("XX", now, 3);
  ASSERT_EQ(p.size(), 8u);
  for (size_t k = 0; k < p.size(); ++k) {
    EXPECT_EQ(p[k].time_ms, k2021 + (half + long(k)) * kHalf) << k;
    EXPECT_EQ(p[k].gco2_per_kwh, s[size_t(half) - 1]) << k;
  }
  // In the second half of the hour: from it, to the same end.
  auto p2 = persistence->forecast("XX", now + kHalf, 3);
  ASSERT_EQ(p2.size(), 7u);
  EXPECT_EQ(p2.front().time_ms, k2021 + (half + 1) * kHalf);
  EXPECT_EQ(p2.back().time_ms, p.back().time_ms);
  EXPECT_EQ(p2.front().gco2_per_kwh, s[size_t(half)]);
  RegionSnapshot snap;
  snap.forecast = p2;
  EXPECT_EQ(forecast_step_ms(snap), kHalf);
  EXPECT_EQ(forecast_value_at(snap, p2.back().time_ms + kHalf - 1), p2.back().gco2_per_kwh);
  EXPECT_TRUE(std::isnan(forecast_value_at(snap, p2.back().time_ms + kHalf)));

  // blend: carbon::forecast_series on the recording, at 30 minutes.
  auto blend = carbon::make_forecaster("blend");
  auto b = make_file_intensity_source(cat, blend)->forecast("XX", now, 24);
  const auto fs = carbon::forecast_series(*blend, s, carbon::from_unix(now / 1000), 50);
  ASSERT_EQ(b.size(), 50u);
  for (size_t k = 0; k < b.size(); ++k) EXPECT_EQ(b[k].gco2_per_kwh, fs[k]) << k;
  // perfect: the recorded half hours.
  auto r = make_file_intensity_source(cat, carbon::make_forecaster("perfect"))->forecast("XX", now, 2);
  ASSERT_EQ(r.size(), 6u);
  for (size_t k = 0; k < r.size(); ++k) EXPECT_EQ(r[k].gco2_per_kwh, s[size_t(half) + k]) << k;
  // current(): the half hour in force; after the recording the same half hour of it.
  EXPECT_EQ(persistence->current("XX", k2021 + (half + 1) * kHalf + 29 * 60 * 1000), s[size_t(half) + 1]);
  const int64_t period = int64_t(v.size()) * kHalf;
  EXPECT_EQ(persistence->current("XX", k2021 + 3 * period + (half + 1) * kHalf), s[size_t(half) + 1]);
  auto later = persistence->forecast("XX", now + 3 * period, 3);
  ASSERT_EQ(later.size(), p.size());
  for (size_t k = 0; k < p.size(); ++k) {
    EXPECT_EQ(later[k].time_ms, p[k].time_ms + 3 * period) << k;
    EXPECT_EQ(later[k].gco2_per_kwh, p[k].gco2_per_kwh) << k;
  }
}

TEST(FileIntensitySource, TheSnapshotStepIsTheCoarsestGridHoldingEveryPoint) {
  auto step = [](std::vector<int64_t> minutes) {
    RegionSnapshot s;
    for (int64_t m : minutes) s.forecast.push_back({k2021 + m * 60 * 1000, 1.0});
    return forecast_step_ms(s) / (60 * 1000);
  };
  EXPECT_EQ(step({}), 60);
  EXPECT_EQ(step({0, 60, 120}), 60);
  EXPECT_EQ(step({0, 60, 90, 120}), 30);  // a live source's hour, then half hours
  EXPECT_EQ(step({15, 30, 45}), 15);
  EXPECT_EQ(step({0, 5, 10}), 5);
  EXPECT_EQ(step({0, 7, 60}), 60);        // off the 5-minute grid: read per hour
}

// --- hardware file ---------------------------------------------------------

struct BadHardware {
  const char* sentence;
  const char* yaml;
  const char* error;
};

const BadHardware kBadHardware[] = {
    {"a region not in the regions file is named", "regions:\n  FR: h100-sxm-8\n", "^hw.yaml: regions.FR: no such region in the regions file \\(regions: DE, GB\\)"},
    {"an unknown profile lists the known ones", "regions:\n  DE: h900\n", "^hw.yaml: regions.DE: unknown hardware profile 'h900' \\(known: .*h100-sxm-8.*cpu-2s"},
    {"an unknown top-level key is named", "regions: {}\nextra: 1\n", "^hw.yaml: unknown key 'extra'"},
    {"regions must be a map", "regions: [DE]\n", "^hw.yaml: regions: required \\(a map"},
    {"regions is required", "{}\n", "^hw.yaml: regions: required"},
    {"a profile must be a string", "regions:\n  DE: [h100-sxm-8]\n", "^hw.yaml: regions.DE: expected a string"},
    {"a top-level key must be a string", "? {a: 1}\n: 2\n", "^hw.yaml: a key: expected a string"},
    {"a region key must be a string", "regions:\n  ? [DE]\n  : h100-sxm-8\n", "^hw.yaml: regions: a key: expected a string"},
};

class BadHardwareFile : public ::testing::TestWithParam<BadHardware> {};

TEST_P(BadHardwareFile, IsRefusedNamingTheField) {
  const BadHardware& c = GetParam();
  auto regions = parse_regions_yaml("regions:\n  - {name: DE}\n  - {name: GB}\n", "r.yaml");
  try {
    apply_hardware_yaml(c.yaml, "hw.yaml", regions);
    FAIL() << "accepted:\n" << c.yaml;
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(std::regex_search(e.what(), std::regex(c.error))) << e.what();
  }
  EXPECT_EQ(regions[0].hardware, "");  // all or nothing
}

INSTANTIATE_TEST_SUITE_P(Table, BadHardwareFile, ::testing::ValuesIn(kBadHardware),
                         [](const auto& info) { return gstest::test_name(info.param.sentence); });

TEST(HardwareFile, SetsEachRegionsProfile) {
  auto regions = parse_regions_yaml("regions:\n  - {name: DE}\n  - {name: GB}\n", "r.yaml");
  apply_hardware_yaml("regions:\n  \"GB\": \"h200-sxm-8\"\n", "hw.yaml", regions);
  EXPECT_EQ(regions[0].hardware, "");
  EXPECT_EQ(regions[1].hardware, "h200-sxm-8");
}

// The hardware profile's embodied grams in placement: scheduler_placement_test.cpp.

// --- snapshots and the forecast gauge -----------------------------------------

class FailingSource : public IntensitySource {
 public:
  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t, int) const override {
    throw std::runtime_error("zone " + zone + ": connection refused");
  }
};

// Found by fuzz_controller_config: a key that is not a string escaped as a
// bare yaml-cpp "bad conversion" that named neither file nor key.
TEST(RegionsFile, AKeyThatIsNotAStringIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"? {a: 1}\n: 2\nregions: [{name: DE}]\n", "r.yaml: a key: wrong type"},
      {"regions:\n  - name: DE\n    ? [zone]\n    : DE\n", "r.yaml: regions[0]: a key: wrong type"},
      {"regions:\n  - name: DE\n    kubernetes:\n      server: https://k\n      ? {a: 1}\n      : 2\n",
       "r.yaml: regions[0].kubernetes: a key: wrong type"},
      {"regions:\n  - name: DE\n    kubernetes:\n      checkpoint_s3:\n        ? [url]\n        : s3://b\n",
       "r.yaml: regions[0].kubernetes.checkpoint_s3: a key: wrong type"},
  };
  for (const auto& [yaml, error] : cases) {
    try {
      parse_regions_yaml(yaml, "r.yaml");
      ADD_FAILURE() << "accepted:\n" << yaml;
    } catch (const YAML::Exception& e) {
      ADD_FAILURE() << "a yaml-cpp exception escaped: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), error);
    }
  }
}

TEST(Snapshot, AZoneWithoutDataHasNoIntensityAndTakesNoJob) {
  auto regions = parse_regions_yaml("regions:\n  - {name: live, zone: westeurope, nodes: 4}\n  - {name: flat, nodes: 2, intensity: 90}\n", "r");
  FailingSource src;
  auto snaps = snapshot_regions(regions, {}, 1767225600000, 48, &src);
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_TRUE(std::isnan(snaps[0].intensity_now));
  EXPECT_TRUE(snaps[0].forecast.empty());
  EXPECT_EQ(snaps[0].free_nodes, 0);
  EXPECT_EQ(snaps[0].capacity_nodes, 4);
  EXPECT_EQ(snaps[1].intensity_now, 90);
  EXPECT_EQ(snaps[1].free_nodes, 2);
}

TEST(Metrics, ForecastGaugeTakesTheValueInForceAtEachHorizon) {
  RegionSnapshot r;
  r.name = "DE";
  r.intensity_now = 300;
  const int64_t h0 = 1767225600000, H = carbon::kHourMs;
  for (int h = 0; h <= 10; ++h) r.forecast.push_back({h0 + h * H, 300.0 + h});
  Metrics m;
  m.set_region_intensities({r}, h0 + 30 * 60 * 1000);
  const std::string text = m.render();
  EXPECT_NE(text.find("greenshard_region_intensity_forecast_gco2_per_kwh{horizon=\"1h\",region=\"DE\"} 301"), std::string::npos) << text;
  EXPECT_NE(text.find("greenshard_region_intensity_forecast_gco2_per_kwh{horizon=\"6h\",region=\"DE\"} 306"), std::string::npos) << text;
  // Beyond the forecast (last point + 1 h): no value.
  EXPECT_NE(text.find("greenshard_region_intensity_forecast_gco2_per_kwh{horizon=\"24h\",region=\"DE\"} Nan"), std::string::npos) << text;
  EXPECT_NE(text.find("greenshard_region_intensity_gco2_per_kwh{region=\"DE\"} 300"), std::string::npos) << text;
  // The render hook runs before every render.
  int calls = 0;
  m.on_render([&] { ++calls; m.set_intensity("GB", 42); });
  const std::string again = m.render();
  EXPECT_EQ(calls, 1);
  EXPECT_NE(again.find("greenshard_region_intensity_gco2_per_kwh{region=\"GB\"} 42"), std::string::npos) << again;
}

// --- the Helm chart's rendered files through the real parsers ---------------

std::string b64decode(const std::string& in) {
  auto out = base64_decode(in, Base64::kStandard);
  if (!out) throw std::runtime_error("rendered Secret data is not base64: " + in);
  return *out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

struct Rendered {
  std::map<std::string, std::string> config;   // ConfigMap data of the controller's config
  std::map<std::string, std::string> secret;   // decoded Secret data ({} when not rendered)
  std::map<std::string, std::string> env;      // controller container env (value only)
  std::vector<std::string> secret_items;       // keys the Deployment mounts from the Secret
};

Rendered helm_template(const std::string& values_file) {
  std::vector<std::string> argv = {HELM_BIN, "template", "gs", CHART_DIR, "--namespace", "greenshard"};
  if (!values_file.empty()) {
    argv.push_back("-f");
    argv.push_back(values_file);
  }
  auto r = gstest::run_process(argv, {{"HOME", ::getenv("HOME") ? ::getenv("HOME") : "/tmp"}}, std::chrono::seconds(120));
  if (r.exit_code != 0) throw std::runtime_error("helm template failed:\n" + r.output);
  Rendered out;
  for (const YAML::Node& doc : YAML::LoadAll(r.output)) {
    if (!doc.IsMap() || !doc["kind"]) continue;
    const std::string kind = doc["kind"].as<std::string>();
    if (kind == "ConfigMap" && doc["data"] && doc["data"]["regions.yaml"])
      for (const auto& kv : doc["data"]) out.config[kv.first.as<std::string>()] = kv.second.as<std::string>();
    if (kind == "Secret" && doc["data"])
      for (const auto& kv : doc["data"]) out.secret[kv.first.as<std::string>()] = b64decode(kv.second.as<std::string>());
    if (kind == "Deployment")
      for (const auto& e : doc["spec"]["template"]["spec"]["containers"][0]["env"])
        if (e["value"]) out.env[e["name"].as<std::string>()] = e["value"].as<std::string>();
    if (kind == "Deployment")
      for (const auto& v : doc["spec"]["template"]["spec"]["volumes"])
        if (v["name"].as<std::string>() == "secrets" && v["secret"]["items"])
          for (const auto& it : v["secret"]["items"]) out.secret_items.push_back(it["key"].as<std::string>());
  }
  return out;
}

struct ChartCase {
  const char* sentence;
  const char* values;          // file under the chart, "" = the defaults
  size_t regions;
  const char* source;
  std::vector<std::pair<std::string, std::string>> hardware;  // region -> profile
};

class ChartFiles : public ::testing::TestWithParam<ChartCase> {};

TEST_P(ChartFiles, ParseWithTheControllersParsers) {
  const ChartCase& c = GetParam();
  ASSERT_TRUE(std::filesystem::exists(HELM_BIN)) << HELM_BIN << ": run scripts/install_helm.sh";
  const std::string values = *c.values ? std::string(CHART_DIR) + "/" + c.values : "";
  Rendered r = helm_template(values);
  gstest::TempDir dir;
  // The mounts of the Deployment (/etc/greenshard/{config,secrets,clusters})
  // materialised under the temp dir.
  const std::string cfg = dir.file("config"), sec = dir.file("secrets"), clusters = dir.file("clusters");
  auto remap = [&](const std::string& s) {
    return replace_all(replace_all(replace_all(s, "/etc/greenshard/config", cfg), "/etc/greenshard/secrets", sec),
                       "/etc/greenshard/clusters", clusters);
  };
  for (const auto& [k, v] : r.config) write(cfg + "/" + k, remap(v));
  for (const auto& [k, v] : r.secret) write(sec + "/" + k, v);
  // What the cluster provides: the service account, and the kubeconfig
  // Secret the values name (not rendered by the chart).
  const std::string sa = dir.file("serviceaccount");
  write(sa + "/token", "sa-token\n");
  write(sa + "/namespace", "greenshard\n");
  {  // the cluster's CA: a real certificate (real openssl)
    auto gen = gstest::run_process({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                                    dir.file("ca.key"), "-out", sa + "/ca.crt", "-days", "1", "-subj", "/CN=kube-ca"},
                                   {}, std::chrono::seconds(60));
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
  }
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  write(clusters + "/us-west/kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
        "clusters:\n- name: k\n  cluster: {server: 'https://us-west.example:6443'}\nusers:\n- name: u\n  user: {token: t}\n");

  // The Deployment points the controller's variables at these files.
  for (auto [var, key] : {std::pair{"GREENSHARD_REGIONS_FILE", "regions.yaml"},
                          std::pair{"GREENSHARD_HARDWARE_FILE", "hardware.yaml"},
                          std::pair{"GREENSHARD_CARBON_SOURCE_FILE", "carbon-source.yaml"}}) {
    ASSERT_TRUE(r.env.count(var)) << var << " not set by the Deployment";
    EXPECT_EQ(r.env[var], std::string("/etc/greenshard/config/") + key);
    ASSERT_TRUE(r.config.count(key)) << key << " not in the ConfigMap";
  }
  ASSERT_TRUE(r.env.count("GREENSHARD_TOKENS_FILE"));

  RegionsFileOptions ro;
  ro.service_account_dir = sa;
  auto regions = load_regions_file(cfg + "/regions.yaml", ro);
  ASSERT_EQ(regions.size(), c.regions);
  load_hardware_file(cfg + "/hardware.yaml", regions);
  for (const auto& [name, profile] : c.hardware) {
    auto it = std::find_if(regions.begin(), regions.end(), [&](const RegionConfig& x) { return x.name == name; });
    ASSERT_NE(it, regions.end()) << name;
    EXPECT_EQ(it->hardware, profile) << name;
  }
  for (const auto& reg : regions) EXPECT_FALSE(reg.hardware.empty()) << reg.name << " has no hardware profile";
  CarbonSourceConfig cs = load_carbon_source_file(cfg + "/carbon-source.yaml");
  EXPECT_EQ(cs.source, c.source);
  auto src = make_intensity_source(cs);
  ASSERT_NE(src, nullptr);
  if (cs.source == "file") {
    // Every zone of the rendered regions is in the data.
    for (const auto& reg : regions)
      if (!reg.zone.empty()) EXPECT_EQ(src->forecast(reg.zone, 1767225600000, 48).size(), 49u) << reg.zone;
  }
  if (cs.source == "electricitymaps") {
    EXPECT_EQ(cs.api_key, "ci-placeholder-not-a-real-key");  // from the rendered Secret
    EXPECT_EQ(cs.url, "https://api.electricitymap.org");
  }
  if (cs.source == "carbon-aware-sdk") {
    EXPECT_EQ(cs.url, "http://carbon-aware-sdk.carbon.svc:8080");
    EXPECT_TRUE(cs.api_key_file.empty()) << cs.api_key_file;
  }
  if (r.secret.count("tokens")) {
    EXPECT_NO_THROW(Auth::load_file(sec + "/tokens"));
  }
  // Every key the pod mounts from the rendered Secret is in it (a missing
  // key keeps the pod from starting).
  if (!r.secret.empty())
    for (const auto& key : r.secret_items) EXPECT_TRUE(r.secret.count(key)) << "mounted Secret key '" << key << "' is not rendered";
}

INSTANTIATE_TEST_SUITE_P(
    Helm, ChartFiles,
    ::testing::Values(
        ChartCase{"the default values", "", 1, "file", {{"in-cluster", "h100-sxm-8"}}},
        ChartCase{"the multi-region GPU values", "ci/multi-region-gpu-values.yaml", 3, "electricitymaps",
                  {{"eu-central", "h100-sxm-8"}, {"eu-north", "h200-sxm-8"}, {"us-west", "a100-sxm-8"}}},
        ChartCase{"a Carbon Aware SDK in the cluster", "ci/carbon-aware-sdk-values.yaml", 1, "carbon-aware-sdk",
                  {{"in-cluster", "h100-sxm-8"}}},
        ChartCase{"checkpoints in S3 and on a PVC", "ci/s3-checkpoints-values.yaml", 3, "file",
                  {{"eu-central", "h100-sxm-8"}, {"us-west", "a100-sxm-8"}, {"eu-north", "h200-sxm-8"}}}),
    [](const auto& info) { return gstest::test_name(info.param.sentence); });

// --- a real controller on a Carbon Aware SDK source on loopback --------------

// The SDK's WebAPI (carbon/carbon_aware_sdk_provider.h): "now" is 900 at the
// hour of the request; the forecast for unix hour H is 100 + H % 97.
double forecast_for_hour(int64_t unix_hour) { return 100.0 + double(unix_hour % 97); }

class FakeCarbonAwareSdk {
 public:
  FakeCarbonAwareSdk() {
    server_.Get("/emissions/bylocations", [this](const httplib::Request& req, httplib::Response& res) {
      if (failing()) return fail(res);
      const auto to = parse_rfc3339(req.get_param_value("toTime"));
      if (!to) { res.status = 400; return; }
      const int64_t h = carbon::floor_hour_ms(*to) / carbon::kSecondMs;
      json pts = json::array({{{"location", req.get_param_value("location")},
                               {"time", format_rfc3339(h * 1000)}, {"rating", 900.0}, {"duration", "01:00:00"}}});
      res.set_content(pts.dump(), "application/json");
    });
    server_.Get("/emissions/forecasts/current", [this](const httplib::Request& req, httplib::Response& res) {
      if (failing()) return fail(res);
      const auto from = parse_rfc3339(req.get_param_value("dataStartAt"));
      const auto to = parse_rfc3339(req.get_param_value("dataEndAt"));
      if (!from || !to) { res.status = 400; return; }
      json data = json::array();
      for (int64_t h = carbon::hours_of_ms(*from); h * carbon::kHourMs < *to; ++h)
        data.push_back({{"location", req.get_param_value("location")}, {"timestamp", format_rfc3339(h * carbon::kHourMs)},
                        {"duration", 60}, {"value", forecast_for_hour(h)}});
      json body = json::array({{{"generatedAt", format_rfc3339(*from)}, {"location", req.get_param_value("location")},
                                {"optimalDataPoints", json::array()}, {"forecastData", data}}});
      res.set_content(body.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeCarbonAwareSdk() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set_failing(bool f) {
    std::lock_guard<std::mutex> l(mu_);
    failing_ = f;
  }

 private:
  bool failing() {
    std::lock_guard<std::mutex> l(mu_);
    return failing_;
  }
  static void fail(httplib::Response& res) {
    res.status = 503;
    res.set_content("{\"error\":\"down\"}", "application/json");
  }
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  bool failing_ = false;
};

const char* kToken = "config-test-token-0001";
const char* kWorkerToken = "config-test-worker-0001";

struct ControllerEnv {
  gstest::TempDir dir;
  std::string tokens = dir.file("tokens"), regions = dir.file("regions.yaml"), source = dir.file("carbon-source.yaml"),
              hardware = dir.file("hardware.yaml");
  ControllerEnv(const std::string& source_yaml) {
    write(tokens, std::string(kToken) + ",team-a,user\n" + kWorkerToken + ",team-a,worker\n");
    write(regions, "regions:\n  - {name: westeu, zone: westeurope, nodes: 2, pue: 1.1}\n  - {name: flat, nodes: 1, intensity: 250}\n");
    write(source, source_yaml);
    write(hardware, "regions:\n  westeu: h100-sxm-8\n");
  }
  // The files through the chart's environment variables, not flags.
  std::map<std::string, std::string> env() const {
    return {{"GREENSHARD_TOKENS_FILE", tokens}, {"GREENSHARD_REGIONS_FILE", regions},
            {"GREENSHARD_CARBON_SOURCE_FILE", source}, {"GREENSHARD_HARDWARE_FILE", hardware}};
  }
  std::unique_ptr<ctltest::ControllerProcess> start() {
    for (const auto& [k, v] : env()) ::setenv(k.c_str(), v.c_str(), 1);
    auto p = std::make_unique<ctltest::ControllerProcess>(
        CONTROLLER_BIN, std::vector<std::string>{"--port", "0", "--data-dir", dir.file("data"), "--cycle-ms", "50"},
        dir.file("controller.log"), dir.file("port"));
    for (const auto& [k, v] : env()) ::unsetenv(k.c_str());
    return p;
  }
};

json get_json(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(10, 0);
  auto res = cli.Get(path, {{"Authorization", std::string("Bearer ") + kToken}});
  if (!res) throw std::runtime_error("GET " + path + ": no answer");
  if (res->status != 200) throw std::runtime_error("GET " + path + ": " + std::to_string(res->status) + " " + res->body);
  return json::parse(res->body);
}

std::string get_text(int port, const std::string& path, int* status = nullptr) {
  httplib::Client cli("127.0.0.1", port);
  auto res = cli.Get(path);
  if (status) *status = res ? res->status : -1;
  return res ? res->body : "";
}

void wait_ready(int port) {
  int st = 0;
  for (int i = 0; i < 1000 && st != 200; ++i) {
    get_text(port, "/readyz", &st);
    if (st != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(st, 200) << "/readyz";
}

const json& region(const json& regions, const std::string& name) {
  for (const auto& r : regions["items"])
    if (r["name"] == name) return r;
  throw std::runtime_error("no region " + name + " in " + regions.dump());
}

double metric(const std::string& text, const std::string& series) {
  auto p = text.find(series + " ");
  if (p == std::string::npos) throw std::runtime_error("no " + series + " in\n" + text);
  return std::stod(text.substr(p + series.size() + 1));
}

int64_t unix_hour_now() { return std::chrono::duration_cast<std::chrono::hours>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(ControllerCarbonSource, CarbonAwareSdkOnLoopbackDrivesRegionsIntensityAndTheForecastGauge) {
  FakeCarbonAwareSdk sdk;
  ControllerEnv env("source: carbon-aware-sdk\nurl: " + sdk.url() + "\nrefresh_seconds: 300\nforecast_horizon_hours: 48\n");
  auto ctl = env.start();
  const int port = ctl->port();
  wait_ready(port);
  const int64_t before = unix_hour_now();
  json regions = get_json(port, "/v1/regions");
  const std::string metrics = get_text(port, "/metrics");
  const int64_t after = unix_hour_now();
  const json& w = region(regions, "westeu");
  EXPECT_EQ(w["intensity_gco2_per_kwh"], 900.0) << w.dump();
  ASSERT_EQ(w["forecast"].size(), 48u) << w.dump();  // the hour now + 47 forecast hours (48 h asked)
  EXPECT_EQ(w["forecast"][0]["gco2_per_kwh"], 900.0);
  for (size_t i = 1; i < w["forecast"].size(); ++i) {
    auto t = parse_rfc3339(w["forecast"][i]["time"].get<std::string>());
    ASSERT_TRUE(t);
    EXPECT_EQ(w["forecast"][i]["gco2_per_kwh"].get<double>(), forecast_for_hour(carbon::hours_of_ms(*t))) << i;
  }
  EXPECT_EQ(w["free_nodes"], 2);
  EXPECT_EQ(region(regions, "flat")["intensity_gco2_per_kwh"], 250.0);
  // The intensity in force for workers: a worker token (or any token of the
  // file) reads it; no token, an unknown one or an unknown region do not.
  auto get = [&](const std::string& path, const std::string& token) {
    httplib::Client cli("127.0.0.1", port);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    auto res = cli.Get(path, h);
    return res ? std::pair{res->status, res->body} : std::pair{-1, std::string()};
  };
  for (const char* token : {kWorkerToken, kToken}) {
    auto [st, body] = get("/v1/regions/westeu/intensity", token);
    ASSERT_EQ(st, 200) << body;
    EXPECT_EQ(json::parse(body), (json{{"region", "westeu"}, {"gco2_per_kwh", 900.0}}));
  }
  EXPECT_EQ(json::parse(get("/v1/regions/flat/intensity", kWorkerToken).second)["gco2_per_kwh"], 250.0);
  EXPECT_EQ(get("/v1/regions/westeu/intensity", "").first, 401);
  EXPECT_EQ(get("/v1/regions/westeu/intensity", "not-a-known-token-at-all").first, 401);
  EXPECT_EQ(get("/v1/regions/atlantis/intensity", kWorkerToken).first, 404);
  // The source's own forecast is the forecaster of the region.
  EXPECT_EQ(metric(metrics, "greenshard_forecast_info{forecaster=\"carbon-aware-sdk\",region=\"westeu\",zone=\"westeurope\"}"), 1);
  // The gauges (the hour may have turned between the two reads of the clock).
  EXPECT_EQ(metric(metrics, "greenshard_region_intensity_gco2_per_kwh{region=\"westeu\"}"), 900.0);
  for (int h : {1, 6, 24}) {
    const double v = metric(metrics, "greenshard_region_intensity_forecast_gco2_per_kwh{horizon=\"" +
                                         std::to_string(h) + "h\",region=\"westeu\"}");
    EXPECT_TRUE(v == forecast_for_hour(before + h) || v == forecast_for_hour(after + h)) << h << "h: " << v;
    EXPECT_EQ(metric(metrics, "greenshard_region_intensity_forecast_gco2_per_kwh{horizon=\"" + std::to_string(h) +
                                  "h\",region=\"flat\"}"),
              250.0);
  }
}

TEST(ControllerCarbonSource, AnSdkThatIsDownAtStartLeavesTheRegionWithoutIntensityUntilItAnswers) {
  FakeCarbonAwareSdk sdk;
  sdk.set_failing(true);
  // refresh_seconds 10: a zone without data is retried every 10 s.
  ControllerEnv env("source: carbon-aware-sdk\nurl: " + sdk.url() + "\nrefresh_seconds: 10\n");
  auto ctl = env.start();
  const int port = ctl->port();
  wait_ready(port);
  json w = region(get_json(port, "/v1/regions"), "westeu");
  EXPECT_TRUE(w["intensity_gco2_per_kwh"].is_null()) << w.dump();
  EXPECT_EQ(w["free_nodes"], 0);
  EXPECT_TRUE(w["forecast"].empty());
  sdk.set_failing(false);
  for (int i = 0; i < 300 && !w["intensity_gco2_per_kwh"].is_number(); ++i) {  // <= 30 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w = region(get_json(port, "/v1/regions"), "westeu");
  }
  EXPECT_EQ(w["intensity_gco2_per_kwh"], 900.0) << w.dump();
  EXPECT_EQ(w["free_nodes"], 2);
  EXPECT_NE(ctl->log().find("zone westeurope"), std::string::npos) << ctl->log();
}

struct BadStart {
  const char* sentence;
  std::string source;     // carbon source file ("" = leave the good one)
  std::string hardware;   // hardware file ("" = leave the good one)
  const char* message;    // in the output, after the file's path
};

TEST(ControllerCarbonSource, BadFilesAreANonZeroExitNamingFileAndField) {
  const BadStart cases[] = {
      {"an unknown carbon source", "source: watttime\n", "", "carbon-source.yaml: source: must be file"},
      {"a refresh below 10 s", "source: file\nrefresh_seconds: 1\n", "", "carbon-source.yaml: refresh_seconds: must be in [10, 86400]"},
      {"a file source with an unknown zone", "source: file\n", "", "regions.yaml: regions[0].zone: "},
      {"a hardware region that does not exist", "source: file\n", "regions:\n  nowhere: cpu-2s\n", "hardware.yaml: regions.nowhere: no such region"},
      {"an unknown hardware profile", "source: file\n", "regions:\n  flat: tpu-v9\n", "hardware.yaml: regions.flat: unknown hardware profile 'tpu-v9'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sentence);
    ControllerEnv env(c.source);
    if (!c.hardware.empty()) write(env.hardware, c.hardware);
    std::map<std::string, std::string> e = env.env();
    e["HOME"] = "/nonexistent";
    auto r = gstest::run_process({CONTROLLER_BIN, "--port", "0", "--data-dir", env.dir.file("data")}, e,
                                 std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
  }
}

TEST(ControllerCarbonSource, FlagsNameTheChartsVariables) {
  auto r = gstest::run_process({CONTROLLER_BIN, "--help"}, {}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* v : {"GREENSHARD_CARBON_SOURCE_FILE", "GREENSHARD_HARDWARE_FILE", "GREENSHARD_REGIONS_FILE",
                        "GREENSHARD_TOKENS_FILE"})
    EXPECT_NE(r.output.find(v), std::string::npos) << v << "\n" << r.output;
}

}  // namespace
