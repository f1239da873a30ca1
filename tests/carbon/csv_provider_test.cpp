// CSV formats: both parsed from recorded snippets; every bad input names
// file, line and column.
#include "carbon/csv_provider.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <fstream>

namespace carbon {
namespace {

// The first rows of the Electricity Maps 2023 export for GB (verbatim).
const char* kEmExport =
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (direct),"
    "Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,"
    "Data Estimated,Data Estimation Method\n"
    "2023-01-01 00:00:00,Great Britain,Great Britain,GB,62.55,91.44,86.0,60.17,elexon.co.uk;  nationalgrideso.com,false,\n"
    "2023-01-01 01:00:00,Great Britain,Great Britain,GB,65.09,94.66,85.67,60.35,elexon.co.uk;  nationalgrideso.com,false,\n"
    "2023-01-01 02:00:00,Great Britain,Great Britain,GB,66.11,95.71,85.36,60.28,\"elexon.co.uk, x\",true,TIME_SLICER_AVERAGE\n";

TEST(CsvProvider, ParsesTheElectricityMapsExport) {
  auto s = parse_intensity_csv(kEmExport, "GB_2023_hourly.csv");
  EXPECT_EQ(s.zone(), "GB");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s.start(), parse_time("2023-01-01T00:00Z"));
  EXPECT_DOUBLE_EQ(s[0], 62.55);
  EXPECT_DOUBLE_EQ(s[2], 66.11);
  CsvOptions lca;
  lca.lifecycle = true;
  EXPECT_DOUBLE_EQ(parse_intensity_csv(kEmExport, "x.csv", lca)[1], 94.66);
}

TEST(CsvProvider, ParsesTheSimpleFormatWithZoneFromFileName) {
  auto s = parse_intensity_csv("timestamp,gco2_per_kwh\r\n2023-05-01T10:00Z,120.5\r\n2023-05-01T11:00Z,0\r\n",
                               "/data/DE.csv");
  EXPECT_EQ(s.zone(), "DE");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_DOUBLE_EQ(s[1], 0.0);
}

struct BadCsv {
  const char* name;
  const char* text;
  const char* where;     // expected "file:line:col" prefix
  const char* message;   // expected substring
};

void PrintTo(const BadCsv& c, std::ostream* os) { *os << '"' << c.name << '"'; }

const char* kH = "timestamp,gco2_per_kwh\n";

class BadCsvTest : public ::testing::TestWithParam<BadCsv> {};

TEST_P(BadCsvTest, NamesFileLineAndColumn) {
  const auto& c = GetParam();
  try {
    parse_intensity_csv(c.text, "in.csv");
    FAIL() << "no error for: " << c.name;
  } catch (const InputError& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind(c.where, 0), 0u) << what;
    EXPECT_NE(what.find(c.message), std::string::npos) << what;
  }
}

std::string s(const char* body) { return std::string(kH) + body; }
const std::string kDup = s("2023-01-01T00:00Z,1\n2023-01-01T00:00Z,2\n");
const std::string kUnsorted = s("2023-01-01T01:00Z,1\n2023-01-01T00:00Z,2\n");
const std::string kNeg = s("2023-01-01T00:00Z,1\n2023-01-01T01:00Z,-3\n");
const std::string kBadTs = s("2023-01-01T00:00Z,1\nyesterday,2\n");
const std::string kBadNum = s("2023-01-01T00:00Z,abc\n");
const std::string kGap = s("2023-01-01T00:00Z,1\n2023-01-01T05:00Z,2\n");
const std::string kFields = s("2023-01-01T00:00Z,1,7\n");
const std::string kEmpty = s("");
const std::string k20Min = s("2023-01-01T00:00Z,1\n2023-01-01T00:20Z,2\n2023-01-01T00:40Z,3\n");
const std::string kMixed = s("2023-01-01T00:00Z,1\n2023-01-01T00:30Z,2\n2023-01-01T00:45Z,3\n2023-01-01T01:00Z,4\n");
const std::string kOffGrid = s("2023-01-01T00:10Z,1\n2023-01-01T00:40Z,2\n");
const std::string kHalfHourGap = s("2023-01-01T00:00Z,1\n2023-01-01T00:30Z,2\n2023-01-01T01:30Z,3\n");
const std::string kOneOffGrid = s("2023-01-01T00:07Z,1\n");

INSTANTIATE_TEST_SUITE_P(
    Carbon, BadCsvTest,
    ::testing::Values(
        BadCsv{"a header without gco2_per_kwh is a missing column", "timestamp,value\n2023-01-01T00:00Z,1\n", "in.csv:1:",
               "missing column 'gco2_per_kwh'"},
        BadCsv{"an unknown header is a missing timestamp column", "time,gco2\n", "in.csv:1:", "missing column 'timestamp'"},
        BadCsv{"an unparseable timestamp names its column", kBadTs.c_str(), "in.csv:3:1:", "unparseable timestamp 'yesterday'"},
        BadCsv{"an unparseable number names its column", kBadNum.c_str(), "in.csv:2:2:", "unparseable number 'abc'"},
        BadCsv{"a duplicate timestamp is rejected", kDup.c_str(), "in.csv:3:1:", "duplicate timestamp"},
        BadCsv{"unsorted rows are rejected", kUnsorted.c_str(), "in.csv:3:1:", "not sorted"},
        BadCsv{"a negative value is rejected", kNeg.c_str(), "in.csv:3:2:", "negative intensity"},
        BadCsv{"a gap of missing hours is rejected", kGap.c_str(), "in.csv:3:1:", "4 missing hour"},
        BadCsv{"a row with too many fields is rejected", kFields.c_str(), "in.csv:2:", "expected 2 fields"},
        BadCsv{"a header without rows has no data", kEmpty.c_str(), "in.csv:2:", "no data rows"},
        BadCsv{"a 20-minute step is not a supported step", k20Min.c_str(), "in.csv:3:1:",
               "2023-01-01T00:20:00Z is 1200 s after the previous row: the step must be 5, 15, 30 or 60 minutes"},
        BadCsv{"a 15-minute row mixed into a 30-minute file names that row", kMixed.c_str(), "in.csv:4:1:",
               "timestamp 2023-01-01T00:45:00Z not on the 30-minute grid"},
        BadCsv{"a 30-minute file that starts off its grid names the first row", kOffGrid.c_str(), "in.csv:2:1:",
               "timestamp 2023-01-01T00:10:00Z not on the 30-minute grid"},
        BadCsv{"a missing half hour in a 30-minute file is a gap", kHalfHourGap.c_str(), "in.csv:4:1:",
               "gap: 1 missing 30-minute step(s) before 2023-01-01T01:30:00Z"},
        BadCsv{"a single row off the 5-minute grid is rejected", kOneOffGrid.c_str(), "in.csv:2:1:",
               "2023-01-01T00:07:00Z is not on the 5-minute grid"},
        BadCsv{"an export missing the direct column is rejected",
               "Datetime (UTC),Zone Id,Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (LCA)\n2023-01-01 00:00:00,GB,1\n",
               "in.csv:1:", "missing column 'Carbon Intensity"},
        BadCsv{"an export with two zones is rejected",
               "Datetime (UTC),Zone Id,Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (direct)\n2023-01-01 00:00:00,GB,1\n"
               "2023-01-01 01:00:00,DE,2\n",
               "in.csv:3:2:", "second zone 'DE'"}),
    [](const ::testing::TestParamInfo<BadCsv>& info) { return gstest::test_name(info.param.name); });

TEST(CsvProvider, FileRoundTripAndUnreadableFile) {
  gstest::TempDir dir;
  IntensitySeries s("KR", parse_time("2023-02-01T00:00Z"), Hours{1}, {400.5, 410.25, 390});
  write_intensity_csv(dir.file("KR.csv"), s);
  auto back = read_intensity_csv(dir.file("KR.csv"));
  EXPECT_EQ(back.zone(), "KR");
  EXPECT_EQ(back.values(), s.values());
  try {
    read_intensity_csv(dir.file("missing.csv"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.csv"), std::string::npos);
  }
}

TEST(CsvProvider, CurrentHistoryForecastAndStaleness) {
  Time t0 = parse_time("2023-03-01T00:00Z");
  CsvProvider p(Hours{2});
  p.add(IntensitySeries("FR", t0, Hours{1}, {10, 20, 30, 40}));
  auto r = p.current("FR", t0 + std::chrono::minutes{90});
  EXPECT_DOUBLE_EQ(r.gco2_per_kwh, 20);
  EXPECT_FALSE(r.stale);
  EXPECT_EQ(r.time, t0 + Hours{1});
  // One hour after the recording ends: the last value, marked stale.
  auto late = p.current("FR", t0 + Hours{4} + std::chrono::minutes{30});
  EXPECT_TRUE(late.stale);
  EXPECT_DOUBLE_EQ(late.gco2_per_kwh, 40);
  // Much later: an error, never a silent value.
  try {
    p.current("FR", t0 + Hours{10});
    FAIL();
  } catch (const ProviderError& e) {
    EXPECT_EQ(e.kind(), ProviderError::Kind::kStale);
  }
  EXPECT_THROW(p.current("XX", t0), ProviderError);
  EXPECT_EQ(p.history("FR", t0 + Hours{1}, t0 + Hours{3}).values(), (std::vector<double>{20, 30}));
  EXPECT_THROW(p.history("FR", t0, t0 + Hours{5}), ProviderError);
  EXPECT_EQ(p.forecast("FR", t0 + std::chrono::minutes{10}, Hours{2}).series.values(), (std::vector<double>{10, 20}));
}

// Sub-hourly files: the file's own step, never averaged.
struct StepCsv {
  const char* name;
  std::string text;
  long step_min;
  const char* start;
  std::vector<double> values;
};

void PrintTo(const StepCsv& c, std::ostream* os) { *os << '"' << c.name << '"'; }

class StepCsvTest : public ::testing::TestWithParam<StepCsv> {};

TEST_P(StepCsvTest, KeepsTheFilesStep) {
  const auto& c = GetParam();
  auto series = parse_intensity_csv(c.text, "Z.csv");
  EXPECT_EQ(series.step(), std::chrono::minutes{c.step_min});
  EXPECT_EQ(series.start(), parse_time(c.start));
  EXPECT_EQ(series.values(), c.values);
}

const std::string kEmHeader =
    "Datetime (UTC),Zone Id,Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (direct),Data Estimated\n";

INSTANTIATE_TEST_SUITE_P(
    Carbon, StepCsvTest,
    ::testing::Values(
        StepCsv{"5-minute rows make a 5-minute series",
                s("2023-01-01T00:05Z,10\n2023-01-01T00:10Z,20\n2023-01-01T00:15Z,30\n"), 5, "2023-01-01T00:05Z",
                {10, 20, 30}},
        StepCsv{"15-minute rows make a 15-minute series",
                s("2023-01-01T00:45Z,10\n2023-01-01T01:00Z,20\n2023-01-01T01:15Z,30\n"), 15, "2023-01-01T00:45Z",
                {10, 20, 30}},
        StepCsv{"30-minute rows make a 30-minute series starting on a half hour",
                s("2023-01-01T00:30Z,10\n2023-01-01T01:00Z,20\n2023-01-01T01:30Z,40\n"), 30, "2023-01-01T00:30Z",
                {10, 20, 40}},
        StepCsv{"a 30-minute Electricity Maps export keeps its half hours",
                kEmHeader + "2023-01-01 00:00:00,GB,62.5,false\n2023-01-01 00:30:00,GB,70,true\n"
                            "2023-01-01 01:00:00,GB,64,false\n",
                30, "2023-01-01T00:00Z", {62.5, 70, 64}},
        StepCsv{"hourly rows stay hourly", s("2023-01-01T00:00Z,1\n2023-01-01T01:00Z,2\n"), 60, "2023-01-01T00:00Z",
                {1, 2}},
        StepCsv{"a single row on a half hour is a 30-minute series", s("2023-01-01T00:30Z,7\n"), 30,
                "2023-01-01T00:30Z", {7}}),
    [](const ::testing::TestParamInfo<StepCsv>& info) { return gstest::test_name(info.param.name); });

TEST(CsvProvider, GapFillHoldsTheLastValueAtTheFilesStep) {
  CsvOptions o;
  o.max_gap_fill = 1;
  auto series = parse_intensity_csv(kHalfHourGap, "Z.csv", o);
  EXPECT_EQ(series.step(), std::chrono::minutes{30});
  EXPECT_EQ(series.values(), (std::vector<double>{1, 2, 2, 3}));
}

TEST(CsvProvider, ThirtyMinuteRecordingCurrentHistoryForecastAndRoundTrip) {
  Time t0 = parse_time("2023-03-01T00:00Z");
  const auto half = std::chrono::minutes{30};
  CsvProvider p(Hours{2});
  p.add(IntensitySeries("FR", t0, half, {10, 20, 30, 40, 50, 60}));
  auto r = p.current("FR", t0 + std::chrono::minutes{40});
  EXPECT_DOUBLE_EQ(r.gco2_per_kwh, 20);
  EXPECT_EQ(r.time, t0 + half);
  auto h = p.history("FR", t0 + half, t0 + Hours{2});
  EXPECT_EQ(h.step(), half);
  EXPECT_EQ(h.values(), (std::vector<double>{20, 30, 40}));
  // The forecast starts at the half hour of `now`.
  auto f = p.forecast("FR", t0 + std::chrono::minutes{70}, Hours{1});
  EXPECT_EQ(f.series.start(), t0 + Hours{1});
  EXPECT_EQ(f.series.values(), (std::vector<double>{30, 40}));
  gstest::TempDir dir;
  write_intensity_csv(dir.file("FR.csv"), p.series("FR"));
  auto back = read_intensity_csv(dir.file("FR.csv"));
  EXPECT_EQ(back.step(), half);
  EXPECT_EQ(back.values(), p.series("FR").values());
}

}  // namespace
}  // namespace carbon
