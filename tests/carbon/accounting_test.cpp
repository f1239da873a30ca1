// SCI accounting against hand-computed cases.
#include "carbon/accounting.h"
#include "carbon/error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace carbon {
namespace {

const Time kT0 = parse_time("2023-06-01T00:00:00Z");

TEST(Accounting, OperationalIsEnergyTimesPueTimesIntensity) {
  // 10 kWh of IT energy, PUE 1.5, 200 g/kWh -> 10 * 1.5 * 200 = 3000 g.
  EXPECT_DOUBLE_EQ(operational_grams(10.0, 1.5, 200.0), 3000.0);
  EXPECT_DOUBLE_EQ(kwh_from_joules(3.6e6), 1.0);
}

TEST(Accounting, IntensityThatChangesMidRunIsIntegrated) {
  // 100 g/kWh for 1 h, then 300 g/kWh. A 2 kW load from 00:30 to 01:45
  // at PUE 1.25: 0.5 h * 100 + 0.75 h * 300 = 275 (g/kWh)h;
  // 2 kW * 1.25 * 275 = 687.5 g.
  IntensitySeries s("Z", kT0, Hours{1}, {100, 300, 50});
  EXPECT_DOUBLE_EQ(operational_grams(s, kT0 + std::chrono::minutes{30}, kT0 + std::chrono::minutes{105}, 2000, 1.25),
                   687.5);
}

TEST(Accounting, OperationalOutsideTheSeriesIsAnError) {
  IntensitySeries s("Z", kT0, Hours{1}, {100, 300});
  EXPECT_THROW(operational_grams(s, kT0, kT0 + Hours{3}, 1000, 1.0), CarbonError);
}

TEST(Accounting, EmbodiedIsTheScIMTerm) {
  // 3700 kg server, 8 GPUs, 5 years; 2 GPUs reserved for 10 h:
  // 3.7e6 g * 10 / (5 * 8760) * 2 / 8 = 211.187... g
  double expect = 3.7e6 * 10.0 / (5 * 8760.0) * 2.0 / 8.0;
  EXPECT_NEAR(embodied_grams(3700, Hours{10}, 5, 2, 8), expect, 1e-9);
  HardwareProfile hw = hardware_profile("h100-sxm-8");
  EXPECT_NEAR(embodied_grams(hw, Hours{10}, 2), 10 * 2 * hw.embodied_g_per_resource_hour(), 1e-9);
}

TEST(Accounting, SciPerFunctionalUnit) {
  // (E*I + M) / R = (900 + 100) / 500 = 2 g per unit.
  EXPECT_DOUBLE_EQ(sci_per_unit(900, 100, 500), 2.0);
  EXPECT_THROW(sci_per_unit(900, 100, 0), CarbonError);
}

TEST(Accounting, BadInputsAreRejected) {
  EXPECT_THROW(operational_grams(-1.0, 1.2, 100.0), CarbonError);
  EXPECT_THROW(operational_grams(1.0, 0.9, 100.0), CarbonError);
  EXPECT_THROW(operational_grams(1.0, 1.2, NAN), CarbonError);
  EXPECT_THROW(embodied_grams(100, Hours{1}, 0, 1, 8), CarbonError);
  EXPECT_THROW(embodied_grams(100, Hours{1}, 4, 1, 0), CarbonError);
}

TEST(Accounting, AccumulatorAddsIntervalsAtTheirIntensity) {
  HardwareProfile hw{"test", "GPU", 4, 500, 50, 0, 876, 1};  // 876 kg / 8760 h / 4 = 25 g per GPU-hour
  EmissionsAccumulator acc(1.5, hw, 2);
  acc.add(3.6e6, Hours{1}, 100);   // 1 kWh -> 1.5 kWh facility * 100 = 150 g; embodied 2 * 25 = 50 g
  acc.add(7.2e6, Hours{1}, 300);   // 2 kWh -> 3 kWh * 300 = 900 g; embodied 50 g
  acc.add_tokens(2000);
  EXPECT_DOUBLE_EQ(acc.operational_grams(), 1050.0);
  EXPECT_NEAR(acc.embodied_grams(), 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(acc.facility_kwh(), 4.5);
  EXPECT_NEAR(acc.sci_per_1k_tokens(), 1150.0 / 2.0, 1e-9);
  EXPECT_DOUBLE_EQ(acc.seconds(), 7200.0);
}

TEST(Accounting, AccumulatorWithoutTokensHasNoSci) {
  EmissionsAccumulator acc(1.1, hardware_profile("a100-sxm-8"), 8);
  EXPECT_TRUE(std::isnan(acc.sci_per_1k_tokens()));
  EXPECT_THROW(EmissionsAccumulator(0.5, hardware_profile("a100-sxm-8"), 8), CarbonError);
}

TEST(Hardware, PowerModelAndProfiles) {
  const auto& hw = hardware_profile("h100-sxm-8");
  // 8 GPUs at full load: 8 * 700 + 2000 W overhead.
  EXPECT_DOUBLE_EQ(hw.power_w(8, 1.0), 7600.0);
  // 4 GPUs idle: 4 * 70 + 2000 * 4 / 8.
  EXPECT_DOUBLE_EQ(hw.power_w(4, 0.0), 1280.0);
  EXPECT_EQ(builtin_hardware_profiles().size(), 4u);
  try {
    hardware_profile("tpu");
    FAIL();
  } catch (const CarbonError& e) {
    EXPECT_NE(std::string(e.what()).find("h200-sxm-8"), std::string::npos);
  }
}

}  // namespace
}  // namespace carbon
