// Hardware profiles: power and embodied carbon of a server type.
// The source of every number is in docs/carbon.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace carbon {

struct HardwareProfile {
  std::string name;                   // "h100-sxm-8", ...
  std::string resource;               // what a job reserves: "GPU" or "CPU socket"
  int resources_per_server = 1;       // SCI "total resources" of one server
  double resource_tdp_w = 0;          // per resource at full load
  double resource_idle_w = 0;         // per resource when idle
  double server_overhead_w = 0;       // rest of the server (CPUs, memory, NICs, fans), per server
  double embodied_kg_per_server = 0;  // total embodied emissions, kgCO2e
  double lifetime_years = 0;          // expected lifetime (1 year = 8760 h)

  // IT power in watts of `resources` resources at `utilization` in [0, 1]:
  //   resources * (idle + u * (tdp - idle)) + overhead * resources / per_server
  double power_w(double resources, double utilization = 1.0) const;
  // SCI M per resource-hour: embodied / (lifetime h) / resources_per_server.
  double embodied_g_per_resource_hour() const;
};

// h100-sxm-8, h200-sxm-8, a100-sxm-8, cpu-2s (see docs/carbon.md).
const std::vector<HardwareProfile>& builtin_hardware_profiles();
// Throws CarbonError listing the known names.
const HardwareProfile& hardware_profile(std::string_view name);

}  // namespace carbon
