// Software Carbon Intensity accounting: SCI = ((E x I) + M) per R.
//
// E: energy in kWh at the facility (IT energy x PUE), I: grid intensity in
// gCO2/kWh, M: embodied share, R: functional unit (for training: 1k tokens).
// All results in grams CO2e.
#pragma once

#include "carbon/hardware.h"
#include "carbon/intensity.h"

namespace carbon {

inline double kwh_from_joules(double joules) { return joules / 3.6e6; }

// E x I for IT energy `it_kwh`: it_kwh * pue * gco2_per_kwh. Throws
// CarbonError on negative energy, pue < 1, negative or non-finite input.
double operational_grams(double it_kwh, double pue, double gco2_per_kwh);

// Constant IT power `it_power_w` over [from, to) against a changing series:
//   power_kW * pue * integral of I dt (hours). Throws when not covered.
double operational_grams(const IntensitySeries& intensity, Time from, Time to, double it_power_w, double pue);

// SCI M term: total_embodied x time_reserved / lifetime x
// resources_reserved / total_resources (lifetime years of 8760 h).
double embodied_grams(double total_embodied_kg, Seconds time_reserved, double lifetime_years,
                      double resources_reserved, double total_resources);
double embodied_grams(const HardwareProfile& hw, Seconds time_reserved, double resources_reserved);

// SCI per functional unit; throws CarbonError when units <= 0.
double sci_per_unit(double operational_g, double embodied_g, double functional_units);

// Incremental accounting for a running job (the worker): call add() for each
// measured interval with the intensity in force during it.
class EmissionsAccumulator {
 public:
  // resources_reserved of `hw` are reserved for the whole run (embodied).
  // Throws CarbonError on pue < 1 or resources_reserved < 0.
  EmissionsAccumulator(double pue, HardwareProfile hw, double resources_reserved);

  // IT energy `energy_joules` consumed over `interval` at `gco2_per_kwh`.
  void add(double energy_joules, Seconds interval, double gco2_per_kwh);
  // Same with sub-second resolution (interval in seconds, >= 0).
  void add_seconds(double energy_joules, double interval_s, double gco2_per_kwh);
  void add_tokens(double tokens);

  double energy_joules() const { return energy_j_; }          // IT energy
  double facility_kwh() const { return kwh_from_joules(energy_j_) * pue_; }
  double operational_grams() const { return operational_g_; }
  double embodied_grams() const { return embodied_g_; }
  double total_grams() const { return operational_g_ + embodied_g_; }
  double seconds() const { return seconds_; }
  double tokens() const { return tokens_; }
  // SCI per 1000 tokens; NaN before any token.
  double sci_per_1k_tokens() const;

 private:
  double pue_;
  HardwareProfile hw_;
  double resources_;
  double energy_j_ = 0, operational_g_ = 0, embodied_g_ = 0, seconds_ = 0, tokens_ = 0;
};

}  // namespace carbon
