// Test helper: a data directory of 30-minute intensity files made from the
// shipped hourly 2023 data (carbon::Catalog layout: zones.csv, 2023/<zone>.csv).
#pragma once

#include <carbon/catalog.h>
#include <carbon/csv_provider.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gstest {

// `zones` of the shipped data from 2023-01-01 for `days` days, each hour as
// two half hours: the first `swing` above the hourly value, the second
// `swing` below (the hour's mean is unchanged), in root/2023/<zone>.csv.
// Returns root.
inline std::string write_half_hourly_data(const std::string& root, const std::vector<std::string>& zones, int days,
                                          double swing) {
  const carbon::Catalog shipped = carbon::Catalog::load(carbon::builtin_data_dir(), zones);
  std::filesystem::create_directories(root + "/2023");
  std::ofstream z(root + "/zones.csv");
  z << "zone,alias,name,continent,estimated_hours,note\n";
  for (const auto& id : shipped.ids()) {
    z << id << ",," << shipped.info(id).name << "," << shipped.info(id).continent << ",0,\n";
    const carbon::IntensitySeries& h = shipped.series(id);
    std::vector<double> v;
    for (size_t i = 0; i < size_t(days) * 24; ++i) {
      v.push_back(h[i] * (1 + swing));
      v.push_back(h[i] * (1 - swing));
    }
    carbon::write_intensity_csv(root + "/2023/" + id + ".csv",
                                carbon::IntensitySeries(id, h.start(), std::chrono::minutes{30}, std::move(v)));
  }
  return root;
}

}  // namespace gstest
