// The shipped 2023 data: 16 Electricity Maps zones, hourly direct intensity.
//
// Layout of a data directory (carbon/data/ in the source tree):
//   zones.csv         zone,alias,name,continent,estimated_hours,note
//   2023/<zone>.csv   simple format "timestamp,gco2_per_kwh" (8760 rows)
//   ATTRIBUTION.md    Electricity Maps, ODbL
// Zones are named by the "Zone Id" inside the original files (BR-CS, DE,
// CL-SEN); the original file names (BR-SP, DE-LU, CL-SIC) are accepted as
// aliases by Catalog::resolve().
#pragma once

#include "carbon/csv_provider.h"
#include "carbon/intensity.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace carbon {

// The shipped data directory: $GREENSHARD_CARBON_DATA when set (it must
// exist), else the source tree's carbon/data baked in at build time. Throws
// CarbonError when the directory does not exist.
std::filesystem::path builtin_data_dir();

struct ZoneInfo {
  std::string id;              // "GB", "BR-CS", ...
  std::string alias;           // original file-name zone ("BR-SP"), or empty
  std::string name;            // "Great Britain"
  std::string continent;       // "Europe"
  int estimated_hours = 0;     // hours flagged "Data Estimated" in 2023
  std::string note;            // quirks (fully estimated, zero hours, ...)
};

class Catalog {
 public:
  // Loads zones.csv and every zone's series. Throws InputError / CarbonError.
  static Catalog load(const std::filesystem::path& dir = builtin_data_dir());
  // Loads only the listed zones (ids or aliases).
  static Catalog load(const std::filesystem::path& dir, const std::vector<std::string>& zones);

  const std::vector<ZoneInfo>& zones() const { return zones_; }
  std::vector<std::string> ids() const;
  bool has(const std::string& zone) const;
  // Zone id for an id or alias; throws CarbonError listing the known zones.
  std::string resolve(const std::string& zone_or_alias) const;
  const ZoneInfo& info(const std::string& zone) const;
  const IntensitySeries& series(const std::string& zone) const;
  // A CsvProvider replaying every loaded zone.
  std::shared_ptr<CsvProvider> provider(Seconds max_age = Hours{2}) const;

 private:
  std::vector<ZoneInfo> zones_;
  std::vector<IntensitySeries> series_;   // parallel to zones_
};

}  // namespace carbon
