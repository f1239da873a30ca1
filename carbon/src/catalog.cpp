#include "carbon/catalog.h"

#include "csv_line.h"

#include <algorithm>
#include <cctype>
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

// The four-digit folders of `dir`, ascending; they must be consecutive.
std::vector<int> read_years(const fs::path& dir) {
  std::vector<int> years;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == 4 && std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); }) &&
        it->is_directory())
      years.push_back(std::stoi(name));
  }
  if (ec) throw CarbonError(dir.string() + ": " + ec.message());
  std::sort(years.begin(), years.end());
  if (years.empty()) throw CarbonError(dir.string() + ": no <year>/ folder of <zone>.csv files (e.g. 2023/)");
  for (size_t i = 1; i < years.size(); ++i)
    if (years[i] != years[i - 1] + 1)
      throw CarbonError(dir.string() + ": years " + std::to_string(years[i - 1]) + " and " + std::to_string(years[i]) +
                        " are not consecutive (missing " + std::to_string(years[i - 1] + 1) + "/)");
  return years;
}

// The first line of SOURCE, or the directory when there is no SOURCE.
std::string read_source(const fs::path& dir) {
  const fs::path file = dir / "SOURCE";
  if (!fs::exists(file)) return dir.string();
  const std::string text = detail::read_file(file.string());
  const std::string line(detail::trim(std::string_view(text).substr(0, text.find('\n'))));
  if (line.empty()) throw InputError(file.string(), 1, 0, "empty (one line naming the data source expected)");
  return line;
}

// The line of `file` whose row fixes the file's step: the second data row
// (its spacing from the first is the step), or the only one.
int step_line(const fs::path& file) {
  const std::string text = detail::read_file(file.string());
  const auto lines = detail::split_lines(text);
  int first = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (detail::trim(lines[i]).empty()) continue;
    if (first > 0) return static_cast<int>(i) + 1;
    first = static_cast<int>(i) + 1;
  }
  return first;
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
  c.years_ = read_years(dir);
  c.source_ = read_source(dir);
  for (auto& z : keep) {
    CsvOptions o;
    o.zone = z.id;
    std::vector<double> values;
    Time start{}, end{};
    Seconds step{0};
    fs::path first_file;   // the zone's first year: its step is the zone's
    for (int y : c.years_) {
      const fs::path file = dir / std::to_string(y) / (z.id + ".csv");
      if (!fs::exists(file)) throw CarbonError(file.string() + ": missing (zone " + z.id + " in year " + std::to_string(y) + ")");
      IntensitySeries s = read_intensity_csv(file, o);   // its own step, checked line by line
      if (values.empty()) {
        start = s.start();
        step = s.step();
        first_file = file;
      } else if (s.step() != step) {
        throw InputError(file.string(), step_line(file), 0,
                         step_name(s.step()) + " data, but " + first_file.string() + " is " + step_name(step) +
                             " (every year of zone " + z.id + " must have the same step)");
      } else if (s.start() != end) {
        throw CarbonError(file.string() + ": starts at " + format_time(s.start()) + ", the year before ends at " +
                          format_time(end) + " (the years must join without a gap or overlap)");
      }
      end = s.end();
      values.insert(values.end(), s.values().begin(), s.values().end());
    }
    c.series_.emplace_back(z.id, start, step, std::move(values));
    c.zones_.push_back(std::move(z));
  }
  return c;
}

std::string Catalog::describe() const {
  std::string years;
  if (!years_.empty())
    years = years_.size() == 1 ? std::to_string(years_.front())
                               : std::to_string(years_.front()) + "-" + std::to_string(years_.back());
  Time from = Time::max(), to = Time::min();
  for (const auto& s : series_) {
    from = std::min(from, s.start());
    to = std::max(to, s.end());
  }
  std::string out = source_ + "; " + years;
  if (!series_.empty()) out += " (" + format_time(from) + " to " + format_time(to) + ")";
  out += "; " + std::to_string(zones_.size()) + (zones_.size() == 1 ? " zone: " : " zones: ");
  for (size_t i = 0; i < zones_.size(); ++i) {
    out += (i ? ", " : "") + zones_[i].id;
    if (i < series_.size() && series_[i].step() != Hours{1}) out += " (" + step_name(series_[i].step()) + ")";
  }
  return out;
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
