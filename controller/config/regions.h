// Regions the controller may place jobs in, from a YAML (or JSON) file:
//
//   regions:
//     - name: DE                 # [A-Za-z0-9._-]{1,64}, unique
//       pue: 1.2                 # >= 1.0
//       nodes: 4                 # capacity, >= 1
//       gpus_per_node: 8         # >= 0
//       executor: local          # local | kubernetes
//       intensity: 380           # constant gCO2e/kWh, or
//       hourly: [..24 numbers..] # a UTC hour-of-day profile (forecast = profile), or
//       zone: DE                 # a zone of the carbon source (config_files.h;
//                                # default: carbon/'s shipped data, blend forecast)
//       kubernetes:              # executor: kubernetes only
//         server: https://10.0.0.1:6443
//         ca_file: /path/ca.crt  # optional (system CAs otherwise)
//         token_file: /path/token
//         namespace: greenshard
//         image: registry/greenshard-worker:0.1   # default worker image
//         checkpoint_claim: ckpt  # PVC for checkpoints (restarts resume from it), or
//         checkpoint_s3:          # S3-compatible object storage (restarts and moves
//           url: s3://bucket/prefix               #   between regions resume from it)
//           endpoint: https://minio.example:9000  # AWS_ENDPOINT_URL_S3 (path-style)
//           region: us-east-1                     # optional: AWS_REGION (worker default us-east-1)
//           secret: greenshard-s3  # Secret (job namespace) with keys AWS_ACCESS_KEY_ID
//                                  # and AWS_SECRET_ACCESS_KEY, mounted in worker pods
//         queue_name: team-a      # Kueue LocalQueue (Jobs start suspended)
//       # or  kubeconfig: /path/kubeconfig   or   in_cluster: true
//
// Unknown keys are errors naming the key path ("regions[1].pue").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controller/core/region_config.h"
#include "controller/core/region_snapshot.h"

namespace controller {

// Checks a checkpoint_s3 block; throws std::runtime_error
// "<where>.<field>: <problem>" (where = "r.yaml: regions[0].kubernetes.checkpoint_s3").
// Normalises url and endpoint (a trailing '/' is dropped).
void validate_s3_checkpoint(S3CheckpointConfig& s3, const std::string& where);

// Where a region's gangs keep their checkpoints, as a comparable key, or ""
// when that place is the region's own. The executors decide it
// (GREENSHARD_CHECKPOINT_DIR overrides the worker's checkpoint.dir):
//   local       "local": every local region runs on the controller's one
//               local executor, under its --data-dir (<data-dir>/jobs/<id>/ckpt),
//               one filesystem for all of them;
//   kubernetes  with checkpoint_s3: "s3:<endpoint> <url>" (<url>/<job-id>);
//               with a checkpoint_claim or an emptyDir: "" (a PVC or a pod's
//               disk is the cluster's own);
//   sim         "sim" (the simulation's gangs keep no files).
// A migratable job may only be allowed regions with one equal, non-empty key
// (POST /v1/jobs answers 422 on field "migratable" otherwise).
std::string shared_checkpoint_location(const RegionConfig& region);

// Intensity for regions configured with `zone:`: carbon/'s shipped data, or
// the source of the carbon source file (controller/config/intensity_sources.h).
class IntensitySource {
 public:
  virtual ~IntensitySource() = default;
  // Points at the source's step from the step of now_ms through the hour
  // horizon_h after floor_hour(now_ms): hourly points from floor_hour(now_ms),
  // at most horizon_h + 1 of them; a sub-hourly source (the file source on
  // 5-, 15- or 30-minute data) from the start of its step containing now_ms
  // (fewer when the source forecasts less far). Throws std::runtime_error
  // naming the zone and the cause when there is no data for it.
  virtual std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms,
                                              int horizon_h) const = 0;
  // The intensity in force at now_ms (the measured or recorded value, not a
  // forecast): what workers integrate their energy with
  // (GET /v1/regions/{name}/intensity). Default: forecast(zone, now_ms, 0)[0].
  virtual double current(const std::string& zone, int64_t now_ms) const {
    return forecast(zone, now_ms, 0).at(0).gco2_per_kwh;
  }
  // The forecaster in use and its live error per zone (config_files.h).
  struct LeadError {
    int lead_h = 0;       // forecast issued lead_h hours before the target hour
    double mape = 0;      // mean |forecast - actual| / actual over the window; NaN before any
    long points = 0;      // scored forecasts in the window
  };
  struct Stats {
    std::string zone;
    std::string forecaster;  // "blend", "perfect", "carbon-aware-sdk", ...
    std::vector<LeadError> leads;
  };
  virtual std::vector<Stats> stats() const { return {}; }
};

struct RegionsFileOptions {
  // Where `in_cluster: true` reads the service account's token, ca.crt and
  // namespace.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// Throws std::runtime_error naming the file and key.
std::vector<RegionConfig> load_regions_file(const std::string& path, const RegionsFileOptions& options = {});
std::vector<RegionConfig> parse_regions_yaml(const std::string& text, const std::string& origin,
                                             const RegionsFileOptions& options = {});
// The default: one local region "local" (1 node, PUE 1.0, 400 g/kWh).
std::vector<RegionConfig> default_regions();

// Builds scheduler snapshots: intensity now and an hourly forecast for the
// next `horizon_h` hours, capacity minus `used_nodes`. A `zone:` region whose
// source throws (no data at all, e.g. a live API that never answered) gets
// intensity_now = NaN, no forecast and free_nodes = 0: it takes no new job
// until the source answers (no value is invented); the error goes to stderr.
std::vector<RegionSnapshot> snapshot_regions(const std::vector<RegionConfig>& regions,
                                             const std::map<std::string, int>& used_nodes,
                                             int64_t now_ms, int horizon_h = 48,
                                             const IntensitySource* source = nullptr);
// Sets each snapshot's free_nodes: capacity minus `used_nodes`, never below
// 0; 0 for a region without an intensity now (NaN: it takes no new job).
// snapshot_regions applies it; the scheduler again once gangs have ended.
void set_free_nodes(std::vector<RegionSnapshot>& regions, const std::map<std::string, int>& used_nodes);

// The intensity in force in a region at now_ms: `zone:` regions
// source->current() (throws when the source has none, or there is no
// source), `hourly:` the hour-of-day value, else the constant.
double intensity_in_force(const RegionConfig& region, int64_t now_ms, const IntensitySource* source);

// The step of a snapshot's forecast points, in ms: the coarsest of 60, 30,
// 15 and 5 minutes whose UTC grid holds every point (hourly points: an
// hour; points at :00 and :30: 30 minutes); an hour when there are no
// points or some point is off the 5-minute grid (such points are then read
// per hour, as hourly ones). The scheduler plans at this step.
int64_t forecast_step_ms(const RegionSnapshot& region);

// The intensity in force at t_ms by the snapshot's forecast (a step
// function at forecast_step_ms): NaN before the first point, after the last
// point's step, or when there is no forecast.
double forecast_value_at(const RegionSnapshot& region, int64_t t_ms);

// Reads a kubeconfig file (current-context: server, CA, token) into a cluster
// config; throws std::runtime_error naming the missing key.
KubeClusterConfig load_kubeconfig(const std::string& path);
// The in-cluster service account (KUBERNETES_SERVICE_HOST/PORT, the mounted
// token and CA); throws when not in a cluster.
KubeClusterConfig in_cluster_config(
    const std::string& service_account_dir = RegionsFileOptions{}.service_account_dir);

}  // namespace controller
