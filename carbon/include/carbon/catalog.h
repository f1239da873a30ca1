// A directory of intensity data (the shipped one: 16 Electricity Maps
// zones, 2023, hourly direct intensity).
//
// Layout of a data directory (carbon/data/ in the source tree):
//   zones.csv           zone,alias,name,continent,estimated_hours,note
//   <year>/<zone>.csv   simple format "timestamp,gco2_per_kwh", one folder per
//                       year held (any four-digit names: 2021/, 2023/, 2024/)
//   SOURCE              optional: one line naming where the data comes from
//                       (shown by Catalog::describe())
//   ATTRIBUTION.md      Electricity Maps, ODbL
// Every year folder found is loaded: a zone's series is its years' files
// end to end, in year order. The years must be consecutive and every zone
// must have a file in each of them that starts where the previous year's
// ends (else InputError/CarbonError naming the file).
// Steps: a file may hold 5-, 15-, 30- or 60-minute data (read by
// read_intensity_csv at its own step: an off-grid timestamp or a step mixed
// into a file is an InputError naming the file and line). A zone has one
// step: all its years' files must share it (else an InputError naming the
// file that differs and the line whose spacing set its step); different
// zones may differ. series(zone) is at the zone's step; hourly data loads
// exactly as before.
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
  int estimated_hours = 0;     // hours flagged "Data Estimated" in the data
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

  // The SOURCE line (or the directory when there is none), the years loaded
  // (ascending) and what was read, e.g. "Electricity Maps, hourly direct
  // gCO2eq/kWh (ODbL); 2023 (2023-01-01T00:00:00Z to 2024-01-01T00:00:00Z);
  // 16 zones: AU-NSW, ..." (a zone that is not hourly: "DE (30-minute)").
  const std::string& source() const { return source_; }
  const std::vector<int>& years() const { return years_; }
  std::string describe() const;

 private:
  std::string source_;
  std::vector<int> years_;
  std::vector<ZoneInfo> zones_;
  std::vector<IntensitySeries> series_;   // parallel to zones_
};

}  // namespace carbon
