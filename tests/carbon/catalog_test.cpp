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
