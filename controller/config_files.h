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
//   data_dir: ""                 # "" = carbon/'s shipped 2023 data, else a
//                                # directory in the same layout (zones.csv,
//                                # 2023/<zone>.csv); replayed at the same hour
//                                # of the year
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

#include "controller/regions.h"

namespace controller {

struct CarbonSourceConfig {
  std::string origin;                 // the file, for messages
  std::string source = "file";        // file | carbon-aware-sdk | electricitymaps
  int refresh_seconds = 300;
  int forecast_horizon_hours = 48;
  int max_stale_seconds = 6 * 3600;
  std::string data_dir;               // file
  std::string url;                    // live sources
  std::string api_key_file;
  std::string api_key;                // read from api_key_file (trimmed)
};

CarbonSourceConfig load_carbon_source_file(const std::string& path);
CarbonSourceConfig parse_carbon_source_yaml(const std::string& text, const std::string& origin);

// The intensity source the configuration names, built on carbon/'s providers
// (file: carbon::Catalog replayed; carbon-aware-sdk / electricitymaps: the
// HTTP provider behind a carbon::StaleFallbackProvider, fetched at most every
// refresh_seconds per zone and cached in between; a failed refresh keeps the
// last forecast's future hours). Throws std::runtime_error naming the file
// and key (e.g. a data_dir that does not hold the data); nullptr when built
// without carbon/.
std::unique_ptr<IntensitySource> make_intensity_source(const CarbonSourceConfig& config);

// Sets RegionConfig::hardware from a hardware file; throws naming the file
// and key (a region not in `regions`, an unknown profile with the known ones).
void load_hardware_file(const std::string& path, std::vector<RegionConfig>& regions);
void apply_hardware_yaml(const std::string& text, const std::string& origin, std::vector<RegionConfig>& regions);

// carbon/'s built-in hardware profile names (empty when built without carbon/).
std::vector<std::string> known_hardware_profiles();

}  // namespace controller
