#include "carbon/catalog.h"

#include "common/spawn.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

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
