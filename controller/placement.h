// Placer: the scheduler's view of carbon-aware placement.
//
// The scheduler gives a Placer one job (PlacementRequest) and a snapshot of
// every region (RegionSnapshot); the Placer answers with a region, the
// windows in which the job runs, the grams it expects, the grams of the
// baseline "run now in the home region", and a sentence explaining why.
//
// Contract:
//   - only regions in request.allowed with free_nodes >= request.nodes are
//     eligible now; a region whose capacity_nodes < request.nodes can never
//     take the job (decision.impossible, with a reason);
//   - windows are [start, end) unix ms, sorted, non-overlapping, summing to
//     the job's duration; a non-interruptible job gets exactly one window;
//   - the last window ends no later than request.latest_end_ms when that is
//     > 0; if no plan meets it, the earliest possible plan is returned with
//     policy "deadline-infeasible" (the scheduler still runs the job);
//   - deterministic: same inputs, same answer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
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
  // none: the carbon placer then counts no embodied emissions there.
  std::string hardware;
};

struct PlacementRequest {
  std::string job_id;
  std::vector<std::string> allowed;
  std::string home_region;
  int nodes = 1;
  int gpus_per_node = 0;
  double duration_s = 3600;
  double power_watts = 300;   // per node, IT power (PUE applied by the placer)
  bool interruptible = false;
  int64_t earliest_start_ms = 0;
  int64_t latest_end_ms = 0;  // 0 = no deadline
};

struct PlacementDecision {
  bool impossible = false;    // no allowed region can ever run it
  bool wait_for_capacity = false;  // eligible regions exist, none has room now
  std::string region;
  std::string policy;         // "run-now-home", "carbon-shift", "carbon-region", ...
  std::vector<std::pair<int64_t, int64_t>> windows;
  double expected_grams = 0;
  double run_now_home_grams = 0;
  std::string explanation;
};

class Placer {
 public:
  virtual ~Placer() = default;
  virtual std::string name() const = 0;
  virtual PlacementDecision place(const PlacementRequest& request,
                                  const std::vector<RegionSnapshot>& regions,
                                  int64_t now_ms) const = 0;
};

// Emissions of running `nodes * power_watts` for [start, end) in a region
// whose intensity follows `forecast` (step function; before the first point
// and after the last, the nearest value; intensity_now when empty), with PUE.
double plan_grams(const RegionSnapshot& region, double it_watts,
                  const std::vector<std::pair<int64_t, int64_t>>& windows);

// The built-in greedy placer (used when carbon/ placement is not linked):
// tries every allowed region with room and every hourly start within the
// slack; picks the fewest grams (ties: home region, then earliest start).
// Interruptible jobs take the cleanest hours before the deadline.
std::unique_ptr<Placer> make_greedy_placer();
// Places on carbon/'s placement (carbon/include/carbon/placement.h).
std::unique_ptr<Placer> make_carbon_placer();

}  // namespace controller
