// The scheduler's view of its regions at one cycle (RegionSnapshot): what
// capacity is free now, what intensity is in force, and the hourly forecast
// the placement plans with. Placement itself is carbon/'s (scheduler.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace controller {

struct ForecastPoint {
  int64_t time_ms = 0;        // start of the hour (or interval)
  double gco2_per_kwh = 0;
};

struct RegionSnapshot {
  std::string name;
  double pue = 1.0;
  int capacity_nodes = 0;     // total nodes
  int free_nodes = 0;         // not held by active jobs
  int gpus_per_node = 0;
  double intensity_now = 0;   // gCO2e/kWh
  std::vector<ForecastPoint> forecast;  // from now on, ascending; may be empty
  std::string executor;       // "local" | "kubernetes"
  // carbon/ hardware profile of the region's servers (hardware file), "" =
  // none: placement then counts no embodied emissions there.
  std::string hardware;
};

}  // namespace controller
