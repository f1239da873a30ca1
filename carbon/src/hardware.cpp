#include "carbon/hardware.h"

#include "carbon/error.h"

namespace carbon {

double HardwareProfile::power_w(double resources, double utilization) const {
  if (utilization < 0) utilization = 0;
  if (utilization > 1) utilization = 1;
  return resources * (resource_idle_w + utilization * (resource_tdp_w - resource_idle_w)) +
         server_overhead_w * resources / resources_per_server;
}

double HardwareProfile::embodied_g_per_resource_hour() const {
  return embodied_kg_per_server * 1000.0 / (lifetime_years * 8760.0) / resources_per_server;
}

const std::vector<HardwareProfile>& builtin_hardware_profiles() {
  // Sources and assumptions: docs/carbon.md, "Hardware profiles".
  static const std::vector<HardwareProfile> profiles{
      // name, resource, per server, TDP, idle, overhead/server, embodied kg/server, lifetime y
      {"h100-sxm-8", "GPU", 8, 700, 70, 2000, 3700, 5},
      {"h200-sxm-8", "GPU", 8, 700, 75, 2000, 3700, 5},
      {"a100-sxm-8", "GPU", 8, 400, 50, 1500, 3700, 6},
      {"cpu-2s", "CPU socket", 2, 280, 70, 150, 1500, 4},
  };
  return profiles;
}

const HardwareProfile& hardware_profile(std::string_view name) {
  std::string known;
  for (const auto& p : builtin_hardware_profiles()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw CarbonError("unknown hardware profile '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace carbon
