#include "carbon/catalog.h"

#include "csv_line.h"

#include <cstdlib>

#ifndef GREENSHARD_CARBON_DATA_DIR
#define GREENSHARD_CARBON_DATA_DIR ""
#endif

namespace carbon {

namespace fs = std::filesystem;

fs::path builtin_data_dir() {
  if (const char* env = std::getenv("GREENSHARD_CARBON_DATA"); env && *env) {
    if (!fs::is_directory(env)) throw CarbonError(std::string("GREENSHARD_CARBON_DATA=") + env + ": not a directory");
    return env;
  }
  fs::path p = GREENSHARD_CARBON_DATA_DIR;
  if (p.empty() || !fs::is_directory(p))
    throw CarbonError("carbon data directory '" + p.string() +
                      "' not found; set GREENSHARD_CARBON_DATA to the carbon/data directory");
  return p;
}

namespace {

std::vector<ZoneInfo> read_zones(const fs::path& dir) {
  std::string file = (dir / "zones.csv").string();
  auto text = detail::read_file(file);
  auto lines = detail::split_lines(text);
  std::vector<std::string> f;
  const std::vector<std::string> expected{"zone", "alias", "name", "continent", "estimated_hours", "note"};
  if (lines.empty() || !detail::split_csv_line(lines[0], f) || f != expected)
    throw InputError(file, 1, 0, "expected header 'zone,alias,name,continent,estimated_hours,note'");
  std::vector<ZoneInfo> zones;
  for (size_t i = 1; i < lines.size(); ++i) {
    int line = static_cast<int>(i) + 1;
    if (detail::trim(lines[i]).empty()) continue;
    if (!detail::split_csv_line(lines[i], f) || f.size() != expected.size())
      throw InputError(file, line, 0, "expected " + std::to_string(expected.size()) + " fields");
    ZoneInfo z;
    z.id = f[0];
    z.alias = f[1];
    z.name = f[2];
    z.continent = f[3];
    double est;
    if (!detail::parse_double(f[4], &est) || est < 0) throw InputError(file, line, 5, "bad estimated_hours '" + f[4] + "'");
    z.estimated_hours = static_cast<int>(est);
    z.note = f[5];
    if (z.id.empty()) throw InputError(file, line, 1, "empty zone");
    zones.push_back(std::move(z));
  }
  if (zones.empty()) throw InputError(file, 2, 0, "no zones");
  return zones;
}

}  // namespace

Catalog Catalog::load(const fs::path& dir) { return load(dir, {}); }

Catalog Catalog::load(const fs::path& dir, const std::vector<std::string>& wanted) {
  Catalog all;
  all.zones_ = read_zones(dir);
  std::vector<ZoneInfo> keep;
  if (wanted.empty()) {
    keep = all.zones_;
  } else {
    for (const auto& w : wanted) keep.push_back(all.info(all.resolve(w)));
  }
  Catalog c;
  for (auto& z : keep) {
    CsvOptions o;
    o.zone = z.id;
    c.series_.push_back(read_intensity_csv(dir / "2023" / (z.id + ".csv"), o));
    c.zones_.push_back(std::move(z));
  }
  return c;
}

std::vector<std::string> Catalog::ids() const {
  std::vector<std::string> v;
  for (const auto& z : zones_) v.push_back(z.id);
  return v;
}

bool Catalog::has(const std::string& zone) const {
  for (const auto& z : zones_)
    if (z.id == zone || (!z.alias.empty() && z.alias == zone)) return true;
  return false;
}

std::string Catalog::resolve(const std::string& zone) const {
  for (const auto& z : zones_)
    if (z.id == zone || (!z.alias.empty() && z.alias == zone)) return z.id;
  std::string known;
  for (const auto& z : zones_) known += (known.empty() ? "" : ", ") + z.id;
  throw CarbonError("unknown zone '" + zone + "' (known: " + known + ")");
}

const ZoneInfo& Catalog::info(const std::string& zone) const {
  std::string id = resolve(zone);
  for (const auto& z : zones_)
    if (z.id == id) return z;
  throw CarbonError("unknown zone '" + zone + "'");
}

const IntensitySeries& Catalog::series(const std::string& zone) const {
  std::string id = resolve(zone);
  for (size_t i = 0; i < zones_.size(); ++i)
    if (zones_[i].id == id) return series_[i];
  throw CarbonError("unknown zone '" + zone + "'");
}

std::shared_ptr<CsvProvider> Catalog::provider(Seconds max_age) const {
  auto p = std::make_shared<CsvProvider>(max_age);
  for (const auto& s : series_) p->add(s);
  return p;
}

}  // namespace carbon
