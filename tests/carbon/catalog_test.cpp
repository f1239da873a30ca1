#include "carbon/catalog.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace carbon {
namespace {

TEST(Catalog, ShipsSixteenZonesOfHourly2023Data) {
  auto c = Catalog::load();
  ASSERT_EQ(c.zones().size(), 16u);
  for (const auto& z : c.zones()) {
    const auto& s = c.series(z.id);
    EXPECT_EQ(s.size(), 8760u) << z.id;
    EXPECT_EQ(s.start(), parse_time("2023-01-01T00:00Z")) << z.id;
  }
  // Means published in data/carbon/SOURCES.md.
  EXPECT_NEAR(c.series("GB").mean(), 128.6, 0.05);
  EXPECT_NEAR(c.series("ZA").mean(), 644.5, 0.05);
  EXPECT_NEAR(c.series("CA-ON").mean(), 46.9, 0.05);
  EXPECT_EQ(c.info("IN-WE").estimated_hours, 8760);
}

TEST(Catalog, FileNameAliasesResolveToTheZoneInside) {
  auto c = Catalog::load(builtin_data_dir(), {"BR-SP", "DE-LU"});
  EXPECT_EQ(c.ids(), (std::vector<std::string>{"BR-CS", "DE"}));
  auto all = Catalog::load();
  EXPECT_EQ(all.resolve("CL-SIC"), "CL-SEN");
  try {
    all.resolve("FR");
    FAIL();
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown zone 'FR'"), std::string::npos);
  }
  auto p = all.provider();
  EXPECT_DOUBLE_EQ(p->current("GB", parse_time("2023-01-01T00:10Z")).gco2_per_kwh, 62.55);
}

// A data directory of zones {A, B} holding the given years, each year's
// file for zone z hourly with value (year - 2000) * 10 + (z == B), for
// `hours(year)` hours from January 1st.
std::filesystem::path data_dir(const gstest::TempDir& dir, const std::string& name, const std::vector<int>& years,
                               bool source_line = true) {
  const std::filesystem::path root = dir.file(name);
  std::filesystem::create_directories(root);
  std::ofstream(root / "zones.csv") << "zone,alias,name,continent,estimated_hours,note\nA,A-OLD,Zone A,Europe,0,\n"
                                       "B,,Zone B,Asia,2,\n";
  if (source_line) std::ofstream(root / "SOURCE") << "Test grid operator, hourly (CC0)\n";
  for (int y : years) {
    const Time start = parse_time(std::to_string(y) + "-01-01T00:00Z");
    const Time end = parse_time(std::to_string(y + 1) + "-01-01T00:00Z");
    const long n = (end - start) / Hours{1};
    std::filesystem::create_directories(root / std::to_string(y));
    for (int z = 0; z < 2; ++z)
      write_intensity_csv(root / std::to_string(y) / (z ? "B.csv" : "A.csv"),
                          IntensitySeries(z ? "B" : "A", start, Hours{1},
                                          std::vector<double>(size_t(n), (y - 2000) * 10.0 + z)));
  }
  return root;
}

TEST(Catalog, LoadsWhicheverYearsTheDirectoryHoldsAndDescribesThem) {
  gstest::TempDir dir;
  // One year that is not 2023 (a leap year).
  Catalog one = Catalog::load(data_dir(dir, "one", {2024}));
  EXPECT_EQ(one.years(), (std::vector<int>{2024}));
  EXPECT_EQ(one.series("A").size(), 8784u);
  EXPECT_EQ(one.series("A").start(), parse_time("2024-01-01T00:00Z"));
  EXPECT_EQ(one.series("A-OLD").mean(), 240.0);
  EXPECT_EQ(one.source(), "Test grid operator, hourly (CC0)");
  EXPECT_EQ(one.describe(),
            "Test grid operator, hourly (CC0); 2024 (2024-01-01T00:00:00Z to 2025-01-01T00:00:00Z); 2 zones: A, B");
  // Consecutive years join into one series per zone.
  Catalog two = Catalog::load(data_dir(dir, "two", {2021, 2022}, false), {"B"});
  EXPECT_EQ(two.years(), (std::vector<int>{2021, 2022}));
  const auto& b = two.series("B");
  EXPECT_EQ(b.size(), 2 * 8760u);
  EXPECT_EQ(b.at(parse_time("2021-12-31T23:00Z")), 211.0);
  EXPECT_EQ(b.at(parse_time("2022-01-01T00:00Z")), 221.0);
  EXPECT_EQ(b.end(), parse_time("2023-01-01T00:00Z"));
  // No SOURCE: the directory names the source.
  EXPECT_EQ(two.describe(), dir.file("two") + "; 2021-2022 (2021-01-01T00:00:00Z to 2023-01-01T00:00:00Z); 1 zone: B");
  // The shipped data describes itself.
  EXPECT_EQ(Catalog::load(builtin_data_dir(), {"GB"}).describe().substr(0, 16), "Electricity Maps");
}

TEST(Catalog, YearsWithAGapAMissingFileOrNoYearAreNamedErrors) {
  gstest::TempDir dir;
  auto message = [](const std::filesystem::path& d) {
    try {
      Catalog::load(d);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(message(data_dir(dir, "gap", {2021, 2023})).find("years 2021 and 2023 are not consecutive (missing 2022/)"),
            std::string::npos)
      << message(data_dir(dir, "gap", {2021, 2023}));
  const auto missing = data_dir(dir, "missing", {2021, 2022});
  std::filesystem::remove(missing / "2022" / "B.csv");
  EXPECT_NE(message(missing).find("2022/B.csv: missing (zone B in year 2022)"), std::string::npos) << message(missing);
  const auto none = data_dir(dir, "none", {});
  EXPECT_NE(message(none).find("no <year>/ folder"), std::string::npos) << message(none);
  // A year whose file does not start where the year before ends.
  const auto shifted = data_dir(dir, "shifted", {2021, 2022});
  write_intensity_csv(shifted / "2022" / "A.csv",
                      IntensitySeries("A", parse_time("2022-01-01T05:00Z"), Hours{1}, std::vector<double>(24, 1.0)));
  EXPECT_NE(message(shifted).find("2022/A.csv: starts at 2022-01-01T05:00:00Z, the year before ends at "
                                  "2022-01-01T00:00:00Z"),
            std::string::npos)
      << message(shifted);
}

// Sub-hourly data directories: zones.csv for {A, B} and the files written
// as text, so a test can put any row on any line.
std::filesystem::path text_dir(const gstest::TempDir& dir, const std::string& name,
                               const std::map<std::string, std::string>& files) {
  const std::filesystem::path root = dir.file(name);
  std::filesystem::create_directories(root);
  std::ofstream(root / "zones.csv") << "zone,alias,name,continent,estimated_hours,note\nA,,Zone A,Europe,0,\n"
                                       "B,,Zone B,Asia,0,\n";
  for (const auto& [path, text] : files) {
    std::filesystem::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  }
  return root;
}

// `n` rows of `step` from `from` (value 100 + row).
std::string rows(const std::string& from, Seconds step, int n) {
  std::string s = "timestamp,gco2_per_kwh\n";
  for (int i = 0; i < n; ++i) s += format_time(parse_time(from) + step * i) + "," + std::to_string(100 + i) + "\n";
  return s;
}

TEST(Catalog, ThirtyMinuteFilesLoadAtTheirStepAndZonesMayDiffer) {
  gstest::TempDir dir;
  using std::chrono::minutes;
  // A: 30-minute, two years joined (the second starts where the first ends);
  // B: hourly.
  const auto root = text_dir(dir, "half",
                             {{"2021/A.csv", rows("2021-12-31T22:00Z", minutes{30}, 4)},
                              {"2022/A.csv", rows("2022-01-01T00:00Z", minutes{30}, 6)},
                              {"2021/B.csv", rows("2021-12-31T22:00Z", Hours{1}, 2)},
                              {"2022/B.csv", rows("2022-01-01T00:00Z", Hours{1}, 3)}});
  Catalog c = Catalog::load(root);
  const auto& a = c.series("A");
  EXPECT_EQ(a.step(), minutes{30});
  EXPECT_EQ(a.size(), 10u);
  EXPECT_EQ(a.start(), parse_time("2021-12-31T22:00Z"));
  EXPECT_EQ(a.end(), parse_time("2022-01-01T03:00Z"));
  EXPECT_EQ(a.at(parse_time("2021-12-31T23:45Z")), 103.0);
  EXPECT_EQ(a.at(parse_time("2022-01-01T00:30Z")), 101.0);
  EXPECT_EQ(c.series("B").step(), Hours{1});
  EXPECT_EQ(c.series("B").size(), 5u);
  EXPECT_NE(c.describe().find("2 zones: A (30-minute), B"), std::string::npos) << c.describe();
  // The provider replays the value of the half hour in force.
  EXPECT_EQ(c.provider()->current("A", parse_time("2022-01-01T01:40Z")).gco2_per_kwh, 103.0);
  // 5- and 15-minute files load at theirs.
  Catalog q = Catalog::load(text_dir(dir, "quarter", {{"2021/A.csv", rows("2021-01-01T00:00Z", minutes{15}, 8)},
                                                      {"2021/B.csv", rows("2021-01-01T00:00Z", minutes{5}, 24)}}));
  EXPECT_EQ(q.series("A").step(), minutes{15});
  EXPECT_EQ(q.series("B").step(), minutes{5});
  EXPECT_EQ(q.series("B").end(), parse_time("2021-01-01T02:00Z"));
}

// The InputError a load throws (file, line and message), or a failure.
InputError load_error(const std::filesystem::path& root) {
  try {
    Catalog::load(root);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << root << " loaded";
  return InputError("", 0, 0, "(loaded)");
}

TEST(Catalog, AnOffGridTimestampInAFifteenMinuteFileIsRefusedNamingFileAndLine) {
  gstest::TempDir dir;
  // Line 1 is the header: rows 00:00, 00:15, 00:30 are lines 2-4; line 5
  // should be 00:45 and is 00:40.
  std::string a = "timestamp,gco2_per_kwh\n2021-01-01T00:00:00Z,10\n2021-01-01T00:15:00Z,11\n"
                  "2021-01-01T00:30:00Z,12\n2021-01-01T00:40:00Z,13\n2021-01-01T01:00:00Z,14\n";
  const auto root = text_dir(dir, "offgrid", {{"2021/A.csv", a}, {"2021/B.csv", rows("2021-01-01T00:00Z", Hours{1}, 2)}});
  const InputError e = load_error(root);
  EXPECT_EQ(e.file(), (root / "2021" / "A.csv").string());
  EXPECT_EQ(e.line(), 5);
  EXPECT_NE(std::string(e.what()).find("A.csv:5:1: timestamp 2021-01-01T00:40:00Z not on the 15-minute grid"),
            std::string::npos)
      << e.what();
}

TEST(Catalog, AFileMixingStepsIsRefusedNamingFileAndLine) {
  gstest::TempDir dir;
  using std::chrono::minutes;
  // 30-minute rows, then a 15-minute one (line 5: 01:15).
  std::string finer = "timestamp,gco2_per_kwh\n2021-01-01T00:00:00Z,10\n2021-01-01T00:30:00Z,11\n"
                      "2021-01-01T01:00:00Z,12\n2021-01-01T01:15:00Z,13\n2021-01-01T01:30:00Z,14\n";
  auto root = text_dir(dir, "finer", {{"2021/A.csv", rows("2021-01-01T00:00Z", Hours{1}, 2)}, {"2021/B.csv", finer}});
  InputError e = load_error(root);
  EXPECT_EQ(e.file(), (root / "2021" / "B.csv").string());
  EXPECT_EQ(e.line(), 5);
  EXPECT_NE(std::string(e.what()).find("not on the 30-minute grid (misaligned, or a different step mixed in)"),
            std::string::npos)
      << e.what();
  // 15-minute rows, then a 30-minute spacing (line 5): a missing step.
  std::string coarser = "timestamp,gco2_per_kwh\n2021-01-01T00:00:00Z,10\n2021-01-01T00:15:00Z,11\n"
                        "2021-01-01T00:30:00Z,12\n2021-01-01T01:00:00Z,13\n";
  root = text_dir(dir, "coarser", {{"2021/A.csv", coarser}, {"2021/B.csv", rows("2021-01-01T00:00Z", Hours{1}, 2)}});
  e = load_error(root);
  EXPECT_EQ(e.file(), (root / "2021" / "A.csv").string());
  EXPECT_EQ(e.line(), 5);
  EXPECT_NE(std::string(e.what()).find("gap: 1 missing 15-minute step(s) before 2021-01-01T01:00:00Z"),
            std::string::npos)
      << e.what();
  // A zone whose years differ in step: the later year's file, at the line
  // whose spacing set its step (blank lines do not count as rows).
  root = text_dir(dir, "years", {{"2021/A.csv", rows("2021-12-31T22:00Z", Hours{1}, 2)},
                                 {"2022/A.csv", "timestamp,gco2_per_kwh\n2022-01-01T00:00:00Z,1\n\n"
                                                "2022-01-01T00:30:00Z,2\n"},
                                 {"2021/B.csv", rows("2021-12-31T22:00Z", Hours{1}, 2)},
                                 {"2022/B.csv", rows("2022-01-01T00:00Z", Hours{1}, 2)}});
  e = load_error(root);
  EXPECT_EQ(e.file(), (root / "2022" / "A.csv").string());
  EXPECT_EQ(e.line(), 4);
  EXPECT_NE(std::string(e.what()).find("30-minute data, but " + (root / "2021" / "A.csv").string() +
                                       " is hourly (every year of zone A must have the same step)"),
            std::string::npos)
      << e.what();
}

TEST(Catalog, EnvironmentOverrideMustExist) {
  gstest::TempDir dir;
  const char* old = std::getenv("GREENSHARD_CARBON_DATA");
  std::string saved = old ? old : "";
  setenv("GREENSHARD_CARBON_DATA", dir.file("nope").c_str(), 1);
  EXPECT_THROW(builtin_data_dir(), CarbonError);
  setenv("GREENSHARD_CARBON_DATA", dir.path().c_str(), 1);
  EXPECT_EQ(builtin_data_dir(), dir.path());
  // An empty directory has no zones.csv: an error naming the file.
  try {
    Catalog::load();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("zones.csv"), std::string::npos);
  }
  if (old) setenv("GREENSHARD_CARBON_DATA", saved.c_str(), 1);
  else unsetenv("GREENSHARD_CARBON_DATA");
}

}  // namespace
}  // namespace carbon
