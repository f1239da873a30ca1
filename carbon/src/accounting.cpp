#include "carbon/accounting.h"

#include "carbon/error.h"

#include <cmath>
#include <limits>

namespace carbon {

namespace {
void check(bool ok, const std::string& msg) {
  if (!ok) throw CarbonError("accounting: " + msg);
}
bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }
}  // namespace

double operational_grams(double it_kwh, double pue, double gco2_per_kwh) {
  check(finite_nonneg(it_kwh), "energy must be finite and >= 0, got " + std::to_string(it_kwh));
  check(std::isfinite(pue) && pue >= 1.0, "PUE must be >= 1, got " + std::to_string(pue));
  check(finite_nonneg(gco2_per_kwh), "intensity must be finite and >= 0, got " + std::to_string(gco2_per_kwh));
  return it_kwh * pue * gco2_per_kwh;
}

double operational_grams(const IntensitySeries& intensity, Time from, Time to, double it_power_w, double pue) {
  check(to >= from, "interval ends before it starts");
  check(finite_nonneg(it_power_w), "power must be finite and >= 0");
  check(std::isfinite(pue) && pue >= 1.0, "PUE must be >= 1, got " + std::to_string(pue));
  return it_power_w / 1000.0 * pue * intensity.integral_hours(from, to);
}

double embodied_grams(double total_embodied_kg, Seconds time_reserved, double lifetime_years, double resources_reserved,
                      double total_resources) {
  check(finite_nonneg(total_embodied_kg), "embodied emissions must be >= 0");
  check(time_reserved.count() >= 0, "time reserved must be >= 0");
  check(std::isfinite(lifetime_years) && lifetime_years > 0, "lifetime must be > 0");
  check(finite_nonneg(resources_reserved), "resources reserved must be >= 0");
  check(std::isfinite(total_resources) && total_resources > 0, "total resources must be > 0");
  double lifetime_s = lifetime_years * 8760.0 * 3600.0;
  return total_embodied_kg * 1000.0 * (static_cast<double>(time_reserved.count()) / lifetime_s) *
         (resources_reserved / total_resources);
}

double embodied_grams(const HardwareProfile& hw, Seconds time_reserved, double resources_reserved) {
  return embodied_grams(hw.embodied_kg_per_server, time_reserved, hw.lifetime_years, resources_reserved,
                        hw.resources_per_server);
}

double sci_per_unit(double operational_g, double embodied_g, double functional_units) {
  check(std::isfinite(functional_units) && functional_units > 0, "functional units (R) must be > 0");
  check(finite_nonneg(operational_g) && finite_nonneg(embodied_g), "grams must be finite and >= 0");
  return (operational_g + embodied_g) / functional_units;
}

EmissionsAccumulator::EmissionsAccumulator(double pue, HardwareProfile hw, double resources_reserved)
    : pue_(pue), hw_(std::move(hw)), resources_(resources_reserved) {
  check(std::isfinite(pue) && pue >= 1.0, "PUE must be >= 1, got " + std::to_string(pue));
  check(finite_nonneg(resources_reserved), "resources reserved must be >= 0");
  check(hw_.resources_per_server > 0 && hw_.lifetime_years > 0, "hardware profile '" + hw_.name + "' is incomplete");
}

void EmissionsAccumulator::add(double energy_joules, Seconds interval, double gco2_per_kwh) {
  add_seconds(energy_joules, static_cast<double>(interval.count()), gco2_per_kwh);
}

void EmissionsAccumulator::add_seconds(double energy_joules, double interval_s, double gco2_per_kwh) {
  check(std::isfinite(interval_s) && interval_s >= 0, "interval must be >= 0");
  double op = carbon::operational_grams(kwh_from_joules(energy_joules), pue_, gco2_per_kwh);
  double lifetime_s = hw_.lifetime_years * 8760.0 * 3600.0;
  double emb = hw_.embodied_kg_per_server * 1000.0 * (interval_s / lifetime_s) * (resources_ / hw_.resources_per_server);
  energy_j_ += energy_joules;
  operational_g_ += op;
  embodied_g_ += emb;
  seconds_ += interval_s;
}

void EmissionsAccumulator::add_tokens(double tokens) {
  check(finite_nonneg(tokens), "tokens must be >= 0");
  tokens_ += tokens;
}

double EmissionsAccumulator::sci_per_1k_tokens() const {
  if (tokens_ <= 0) return std::numeric_limits<double>::quiet_NaN();
  return sci_per_unit(operational_g_, embodied_g_, tokens_ / 1000.0);
}

}  // namespace carbon
