#include "carbon/csv_provider.h"

#include "csv_line.h"

#include <algorithm>

namespace carbon {

namespace {

constexpr const char* kEmTime = "Datetime (UTC)";
constexpr const char* kEmZone = "Zone Id";
constexpr const char* kEmDirect = "Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (direct)";
constexpr const char* kEmLca = "Carbon Intensity gCO\xE2\x82\x82" "eq/kWh (LCA)";
constexpr const char* kEmEstimated = "Data Estimated";

int find_column(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (detail::trim(header[i]) == name) return static_cast<int>(i);
  return -1;
}

bool parse_bool(std::string_view s, bool* out) {
  s = detail::trim(s);
  if (s == "true" || s == "True" || s == "TRUE" || s == "1") return *out = true, true;
  if (s == "false" || s == "False" || s == "FALSE" || s == "0" || s.empty()) return *out = false, true;
  return false;
}

}  // namespace

IntensitySeries parse_intensity_csv(const std::string& text, const std::string& name, const CsvOptions& options) {
  auto lines = detail::split_lines(text);
  if (lines.empty() || detail::trim(lines[0]).empty()) throw InputError(name, 1, 0, "empty file (expected a header line)");
  std::vector<std::string> header, f;
  if (!detail::split_csv_line(lines[0], header)) throw InputError(name, 1, 0, "unterminated quote in header");

  int c_time, c_value, c_zone = -1, c_est = -1;
  std::string value_name;
  bool em = find_column(header, kEmTime) >= 0;
  if (em) {
    c_time = find_column(header, kEmTime);
    c_zone = find_column(header, kEmZone);
    value_name = options.lifecycle ? kEmLca : kEmDirect;
    c_value = find_column(header, value_name);
    c_est = find_column(header, kEmEstimated);
    if (c_zone < 0) throw InputError(name, 1, 0, "missing column '" + std::string(kEmZone) + "'");
    if (c_value < 0) throw InputError(name, 1, 0, "missing column '" + value_name + "'");
  } else {
    c_time = find_column(header, "timestamp");
    c_value = find_column(header, "gco2_per_kwh");
    c_est = find_column(header, "estimated");
    value_name = "gco2_per_kwh";
    if (c_time < 0)
      throw InputError(name, 1, 0,
                       "missing column 'timestamp' (expected 'timestamp,gco2_per_kwh' or an Electricity Maps export "
                       "with '" + std::string(kEmTime) + "')");
    if (c_value < 0) throw InputError(name, 1, 0, "missing column 'gco2_per_kwh'");
  }

  std::string zone = options.zone;
  if (zone.empty() && !em) {
    std::string stem = name;
    auto slash = stem.find_last_of('/');
    if (slash != std::string::npos) stem = stem.substr(slash + 1);
    auto dot = stem.find('.');
    if (dot != std::string::npos) stem = stem.substr(0, dot);
    zone = stem;
  }
  std::vector<IntensitySample> samples;
  samples.reserve(lines.size());
  std::vector<int> sample_line;
  Seconds step = Hours{1};   // set from the first two rows
  for (size_t li = 1; li < lines.size(); ++li) {
    int line_no = static_cast<int>(li) + 1;
    if (detail::trim(lines[li]).empty()) continue;
    if (!detail::split_csv_line(lines[li], f)) throw InputError(name, line_no, 0, "unterminated quote");
    if (f.size() != header.size())
      throw InputError(name, line_no, 0,
                       "expected " + std::to_string(header.size()) + " fields, got " + std::to_string(f.size()));
    IntensitySample s;
    if (!parse_time(f[c_time], &s.time))
      throw InputError(name, line_no, c_time + 1, "unparseable timestamp '" + f[c_time] + "'");
    if (!detail::parse_double(f[c_value], &s.gco2_per_kwh))
      throw InputError(name, line_no, c_value + 1, "unparseable number '" + f[c_value] + "' in '" + value_name + "'");
    if (s.gco2_per_kwh < 0)
      throw InputError(name, line_no, c_value + 1, "negative intensity " + std::string(detail::trim(f[c_value])));
    if (c_est >= 0 && !parse_bool(f[c_est], &s.estimated))
      throw InputError(name, line_no, c_est + 1, "expected true/false, got '" + f[c_est] + "'");
    if (c_zone >= 0) {
      std::string z(detail::trim(f[c_zone]));
      if (z.empty()) throw InputError(name, line_no, c_zone + 1, "empty zone");
      if (zone.empty()) zone = options.zone.empty() ? z : options.zone;
      else if (options.zone.empty() && z != zone)
        throw InputError(name, line_no, c_zone + 1, "second zone '" + z + "' (file holds '" + zone + "')");
    }
    if (!samples.empty()) {
      auto dt = s.time - samples.back().time;
      if (dt.count() == 0)
        throw InputError(name, line_no, c_time + 1,
                         "duplicate timestamp " + format_time(s.time) + " (also line " +
                             std::to_string(sample_line.back()) + ")");
      if (dt.count() < 0)
        throw InputError(name, line_no, c_time + 1,
                         "timestamps not sorted: " + format_time(s.time) + " after " + format_time(samples.back().time));
      if (samples.size() == 1) {
        // The step: the spacing of the first two rows when at most an hour
        // (then 5, 15, 30 or 60 minutes); a longer one is an hourly gap.
        if (dt <= Hours{1} && !is_supported_step(dt))
          throw InputError(name, line_no, c_time + 1,
                           "timestamp " + format_time(s.time) + " is " + std::to_string(dt.count()) +
                               " s after the previous row: the step must be 5, 15, 30 or 60 minutes");
        step = dt <= Hours{1} ? dt : Seconds{Hours{1}};
        if (floor_to_step(samples[0].time, step) != samples[0].time)
          throw InputError(name, sample_line[0], c_time + 1,
                           "timestamp " + format_time(samples[0].time) + " not on the " + step_name(step) + " grid");
      }
      if (floor_to_step(s.time, step) != s.time)
        throw InputError(name, line_no, c_time + 1,
                         "timestamp " + format_time(s.time) + " not on the " + step_name(step) +
                             " grid (misaligned, or a different step mixed in)");
      long missing = dt / step - 1;
      if (missing > options.max_gap_fill)
        throw InputError(name, line_no, c_time + 1,
                         "gap: " + std::to_string(missing) +
                             (step == Hours{1} ? " missing hour(s)" : " missing " + step_name(step) + " step(s)") +
                             " before " + format_time(s.time));
    }
    samples.push_back(s);
    sample_line.push_back(line_no);
  }
  if (samples.empty()) throw InputError(name, 2, 0, "no data rows");
  if (samples.size() == 1) {
    try {
      step = IntensitySeries::detect_step(zone, samples);
    } catch (const CarbonError& e) {
      throw InputError(name, sample_line[0], c_time + 1, e.what());
    }
  }
  return IntensitySeries::from_samples(zone, samples, step, options.max_gap_fill);
}

IntensitySeries read_intensity_csv(const std::filesystem::path& file, const CsvOptions& options) {
  return parse_intensity_csv(detail::read_file(file.string()), file.string(), options);
}

void write_intensity_csv(const std::filesystem::path& file, const IntensitySeries& series) {
  std::string out = "timestamp,gco2_per_kwh\n";
  char buf[64];
  for (size_t i = 0; i < series.size(); ++i) {
    std::snprintf(buf, sizeof buf, ",%.6g\n", series[i]);
    out += format_time(series.start() + series.step() * static_cast<long>(i)) + buf;
  }
  FILE* fp = std::fopen(file.c_str(), "wb");
  if (!fp) throw InputError(file.string(), 0, 0, "cannot write");
  bool ok = std::fwrite(out.data(), 1, out.size(), fp) == out.size();
  ok = std::fclose(fp) == 0 && ok;
  if (!ok) throw InputError(file.string(), 0, 0, "write failed");
}

void CsvProvider::add(IntensitySeries series) {
  std::string z = series.zone();
  series_.insert_or_assign(z, std::move(series));
}

void CsvProvider::add_file(const std::filesystem::path& file, const CsvOptions& options) {
  add(read_intensity_csv(file, options));
}

const IntensitySeries& CsvProvider::series(const std::string& zone) const {
  auto it = series_.find(zone);
  if (it == series_.end()) throw ProviderError(ProviderError::Kind::kNoData, "csv: unknown zone '" + zone + "'");
  return it->second;
}

Reading CsvProvider::current(const std::string& zone, Time now) {
  const auto& s = series(zone);
  Reading r;
  r.zone = zone;
  r.source = name();
  if (now < s.start())
    throw ProviderError(ProviderError::Kind::kNoData,
                        "csv: " + zone + " recording starts at " + format_time(s.start()) + ", after " + format_time(now));
  if (now < s.end()) {
    r.time = s.start() + s.step() * static_cast<long>(s.index_of(now));
    r.gco2_per_kwh = s.at(now);
    return r;
  }
  Time last = s.end() - s.step();
  if (now - last > max_age_)
    throw ProviderError(ProviderError::Kind::kStale, "csv: " + zone + " recording ends at " + format_time(s.end()) +
                                                         ", newest point " + format_time(last) + " is older than " +
                                                         std::to_string(max_age_.count()) + " s at " + format_time(now));
  r.time = last;
  r.gco2_per_kwh = s[s.size() - 1];
  r.stale = true;
  r.source = name() + " (stale: after the end of the recording)";
  return r;
}

IntensitySeries CsvProvider::history(const std::string& zone, Time from, Time to) {
  const auto& s = series(zone);
  if (to <= from) throw ProviderError(ProviderError::Kind::kNoData, "csv: empty history range");
  if (!s.covers(floor_to_step(from, s.step()), ceil_to_step(to, s.step())))
    throw ProviderError(ProviderError::Kind::kNoData, "csv: " + zone + " [" + format_time(from) + ", " +
                                                          format_time(to) + ") outside the recording [" +
                                                          format_time(s.start()) + ", " + format_time(s.end()) + ")");
  return s.slice(from, to);
}

Forecast CsvProvider::forecast(const std::string& zone, Time now, Hours horizon) {
  Forecast f;
  const Time t0 = floor_to_step(now, series(zone).step());
  f.series = history(zone, t0, t0 + horizon);
  f.generated_at = now;
  return f;
}

}  // namespace carbon
