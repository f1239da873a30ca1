// The controller's other configuration files (the Helm chart renders them
// into its ConfigMap; see charts/greenshard/templates/configmap.yaml):
//
// Carbon source (--carbon-source, GREENSHARD_CARBON_SOURCE_FILE): where the
// intensity of `zone:` regions comes from.
//
//   source: file                 # file | carbon-aware-sdk | electricitymaps
//   refresh_seconds: 300         # live sources: re-fetch period, [10, 86400]
//   forecast_horizon_hours: 48   # live sources: forecast asked for, [1, 168]
//   max_stale_seconds: 21600     # live sources: how old a last good "now"
//                                # value may be when the source fails
//                                # (carbon::StaleFallbackProvider), [0, 604800]
//   # source: file
//   data_dir: ""                 # "" = carbon/'s shipped data, else a
//                                # directory in the same layout (zones.csv,
//                                # <year>/<zone>.csv for each year held;
//                                # carbon/catalog.h); replayed at the same hour
//                                # of the recording when now is outside it
//   forecaster: blend            # carbon::make_forecaster name over the
//                                # replayed history before floor_hour(now):
//                                # persistence | seasonal24 | seasonal168 |
//                                # blend | <name>+noise<pct>; the forecaster
//                                # is given only the past, never the future
//   replay: false                # true: a simulation replay, which alone may
//                                # use forecaster: perfect (the recorded
//                                # future, also perfect+noise<pct>); perfect
//                                # without replay: true is an error
//   # source: carbon-aware-sdk | electricitymaps
//   url: https://api.electricitymap.org     # http(s)://, required
//   api_key_file: /etc/greenshard/secrets/electricitymaps-api-key
//                                # electricitymaps: required, non-empty;
//                                # carbon-aware-sdk: optional (carbon/'s client
//                                # sends no key; a non-empty one is warned about)
//
// Hardware (--hardware, GREENSHARD_HARDWARE_FILE): the hardware profile
// (carbon/hardware.h name) of each region:
//
//   regions:
//     DE: h100-sxm-8
//
// Every key must name a region of the regions file; unknown keys, wrong
// types and values out of range are std::runtime_error naming the file and
// the key ("carbon.yaml: refresh_seconds: must be in [10, 86400]").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "controller/config/quota.h"
#include "controller/config/regions.h"

namespace carbon {
class Catalog;
class Forecaster;
}  // namespace carbon

namespace controller {

struct CarbonSourceConfig {
  std::string origin;                 // the file, for messages
  std::string source = "file";        // file | carbon-aware-sdk | electricitymaps
  int refresh_seconds = 300;
  int forecast_horizon_hours = 48;
  int max_stale_seconds = 6 * 3600;
  std::string data_dir;               // file
  std::string forecaster = "blend";   // file: carbon::make_forecaster name
  bool replay = false;                // file: may use the recorded future (perfect)
  std::string url;                    // live sources
  std::string api_key_file;
  std::string api_key;                // read from api_key_file (trimmed)
};

CarbonSourceConfig load_carbon_source_file(const std::string& path);
CarbonSourceConfig parse_carbon_source_yaml(const std::string& text, const std::string& origin);

// Sets RegionConfig::hardware from a hardware file; throws naming the file
// and key (a region not in `regions`, an unknown profile with the known ones).
void load_hardware_file(const std::string& path, std::vector<RegionConfig>& regions);
void apply_hardware_yaml(const std::string& text, const std::string& origin, std::vector<RegionConfig>& regions);

// Quotas (--quotas, GREENSHARD_QUOTAS_FILE): tenant -> region -> {nodes,
// gpus} (controller/config/quota.h has the format and its meaning). Tenants are
// 1..63 of [a-z0-9-] (as in the tokens file), regions must be in `regions`,
// nodes and gpus integers in [0, 1000000]; anything else is a
// std::runtime_error naming the file and the key
// ("quotas.yaml: tenants.team-a.DE.nodes: must be in [0, 1000000], got -1").
QuotaConfig load_quota_file(const std::string& path, const std::vector<RegionConfig>& regions);
QuotaConfig parse_quota_yaml(const std::string& text, const std::string& origin,
                             const std::vector<RegionConfig>& regions);

}  // namespace controller
