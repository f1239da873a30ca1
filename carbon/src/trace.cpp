#include "carbon/trace.h"

#include "carbon/error.h"
#include "csv_line.h"
#include "rng.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace carbon {

using std::chrono::days;

Time next_workday_9am_after(Time t) {
  Time d = std::chrono::floor<days>(t) + days{1};
  while (weekday(d) == 0 || weekday(d) == 6) d += days{1};
  return d + Hours{9};
}

Time next_semi_weekly_9am_after(Time t) {
  Time c = std::chrono::floor<days>(t) + Hours{9};
  while (c <= t || (weekday(c) != 1 && weekday(c) != 4)) c += days{1};
  return c;
}

std::vector<Job> generate_trace(const TraceOptions& o) {
  if (o.regions.empty()) throw CarbonError("generate_trace: no regions");
  if (o.to <= o.from) throw CarbonError("generate_trace: empty period");
  if (o.min_hours < 1 || o.max_hours < o.min_hours) throw CarbonError("generate_trace: bad duration range");
  if (o.gpu_choices.empty()) throw CarbonError("generate_trace: no GPU choices");
  for (int g : o.gpu_choices)
    if (g < 1) throw CarbonError("generate_trace: GPU choices must be >= 1");
  if (!(o.jobs_per_workday >= 0)) throw CarbonError("generate_trace: jobs_per_workday must be >= 0");
  detail::Rng rng(o.seed);
  std::vector<Job> jobs;
  for (Time day = std::chrono::floor<days>(o.from); day < o.to; day += days{1}) {
    int wd = weekday(day);
    if (wd == 0 || wd == 6) continue;
    int n = rng.poisson(o.jobs_per_workday);
    std::vector<Job> today;
    for (int i = 0; i < n; ++i) {
      Job j;
      j.submit = day + Hours{9} + std::chrono::minutes{rng.uniform_int(0, 8 * 60 - 1)};
      j.duration = Hours{rng.uniform_int(o.min_hours, o.max_hours)};
      j.gpus = o.gpu_choices[rng.uniform_int(0, static_cast<int>(o.gpu_choices.size()) - 1)];
      j.home_region = o.regions[rng.uniform_int(0, static_cast<int>(o.regions.size()) - 1)];
      j.interruptible = rng.uniform() < o.interruptible_fraction;
      Time earliest_finish = j.submit + j.duration;
      j.deadline = rng.uniform() < o.semi_weekly_fraction ? next_semi_weekly_9am_after(earliest_finish)
                                                          : next_workday_9am_after(earliest_finish);
      if (j.submit >= o.from && j.submit < o.to) today.push_back(std::move(j));
    }
    std::stable_sort(today.begin(), today.end(), [](const Job& a, const Job& b) { return a.submit < b.submit; });
    for (auto& j : today) jobs.push_back(std::move(j));
  }
  char id[32];
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::snprintf(id, sizeof id, "j%06zu", i + 1);
    jobs[i].id = id;
  }
  return jobs;
}

std::vector<Job> parse_trace_csv(const std::string& text, const std::string& name) {
  auto lines = detail::split_lines(text);
  std::vector<std::string> header, f;
  if (lines.empty() || !detail::split_csv_line(lines[0], header)) throw InputError(name, 1, 0, "missing header line");
  const char* cols[] = {"id",           "submit",          "duration_h", "gpus",     "deadline",
                        "home_region",  "interruptible",   "allowed_regions",
                        "min_gpus",     "max_gpus",        "migratable"};
  constexpr int kCols = 11, kRequired = 7;   // the rest are optional
  int idx[kCols];
  for (int c = 0; c < kCols; ++c) {
    idx[c] = -1;
    for (size_t i = 0; i < header.size(); ++i)
      if (detail::trim(header[i]) == cols[c]) idx[c] = static_cast<int>(i);
    if (idx[c] < 0 && c < kRequired) throw InputError(name, 1, 0, std::string("missing column '") + cols[c] + "'");
  }
  std::vector<Job> jobs;
  std::set<std::string> ids;
  for (size_t li = 1; li < lines.size(); ++li) {
    int line = static_cast<int>(li) + 1;
    if (detail::trim(lines[li]).empty()) continue;
    if (!detail::split_csv_line(lines[li], f) || f.size() != header.size())
      throw InputError(name, line, 0, "expected " + std::to_string(header.size()) + " fields");
    auto col = [&](int c) { return std::string(detail::trim(f[idx[c]])); };
    auto err = [&](int c, const std::string& m) { return InputError(name, line, idx[c] + 1, m); };
    Job j;
    j.id = col(0);
    if (j.id.empty()) throw err(0, "empty id");
    if (!ids.insert(j.id).second) throw err(0, "duplicate id '" + j.id + "'");
    if (!parse_time(col(1), &j.submit)) throw err(1, "unparseable timestamp '" + col(1) + "'");
    double h;
    if (!detail::parse_double(col(2), &h) || h <= 0) throw err(2, "duration_h must be a number > 0, got '" + col(2) + "'");
    j.duration = Seconds{static_cast<long>(std::llround(h * 3600))};
    double g;
    if (!detail::parse_double(col(3), &g) || g < 1 || g != std::floor(g)) throw err(3, "gpus must be an integer >= 1, got '" + col(3) + "'");
    j.gpus = static_cast<int>(g);
    if (col(4).empty()) j.deadline = Time::max();
    else if (!parse_time(col(4), &j.deadline)) throw err(4, "unparseable timestamp '" + col(4) + "'");
    else if (j.deadline <= j.submit) throw err(4, "deadline is not after submit");
    j.home_region = col(5);
    if (j.home_region.empty()) throw err(5, "empty home_region");
    std::string in = col(6);
    if (in == "true" || in == "1") j.interruptible = true;
    else if (in == "false" || in == "0") j.interruptible = false;
    else throw err(6, "interruptible must be true or false, got '" + in + "'");
    if (idx[7] >= 0) {
      std::string a = col(7);
      size_t p = 0;
      while (p < a.size()) {
        size_t q = a.find(';', p);
        if (q == std::string::npos) q = a.size();
        std::string r(detail::trim(std::string_view(a).substr(p, q - p)));
        if (!r.empty()) j.allowed_regions.push_back(r);
        p = q + 1;
      }
    }
    auto width = [&](int c, int* out) {
      if (idx[c] < 0 || col(c).empty()) return;
      double v;
      if (!detail::parse_double(col(c), &v) || v < 1 || v != std::floor(v))
        throw err(c, std::string(cols[c]) + " must be an integer >= 1, got '" + col(c) + "'");
      *out = static_cast<int>(v);
    };
    width(8, &j.min_gpus);
    width(9, &j.max_gpus);
    if (j.min_width() > j.gpus) throw err(8, "min_gpus " + std::to_string(j.min_gpus) + " is above gpus " + std::to_string(j.gpus));
    if (j.max_width() < j.gpus) throw err(9, "max_gpus " + std::to_string(j.max_gpus) + " is below gpus " + std::to_string(j.gpus));
    if (idx[10] >= 0 && !col(10).empty()) {
      std::string m = col(10);
      if (m == "true" || m == "1") j.migratable = true;
      else if (m == "false" || m == "0") j.migratable = false;
      else throw err(10, "migratable must be true or false, got '" + m + "'");
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void make_elastic(Job& j, int width_step) {
  j.width_step = std::max(1, width_step);
  j.min_gpus = std::max(j.width_step, j.gpus / 2 / j.width_step * j.width_step);
  j.max_gpus = j.gpus * 2;
  j.scaling = {{j.gpus, 1.0}, {j.max_gpus, 1.85}};
  if (j.min_gpus < j.gpus) j.scaling.push_back({j.min_gpus, 0.54});
}

std::vector<Job> read_trace_csv(const std::filesystem::path& file) {
  return parse_trace_csv(detail::read_file(file.string()), file.string());
}

void write_trace_csv(const std::filesystem::path& file, const std::vector<Job>& jobs) {
  bool elastic = false;
  for (const auto& j : jobs) elastic = elastic || j.elastic();
  std::string out = std::string("id,submit,duration_h,gpus,deadline,home_region,interruptible,allowed_regions") +
                    (elastic ? ",min_gpus,max_gpus,migratable" : "") + "\n";
  char buf[64];
  for (const auto& j : jobs) {
    std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(j.duration.count()) / 3600.0);
    std::string allowed;
    for (const auto& r : j.allowed_regions) allowed += (allowed.empty() ? "" : ";") + r;
    out += j.id + "," + format_time(j.submit) + "," + buf + "," + std::to_string(j.gpus) + "," +
           (j.deadline == Time::max() ? std::string() : format_time(j.deadline)) + "," + j.home_region + "," +
           (j.interruptible ? "true" : "false") + "," + allowed;
    if (elastic)
      out += "," + std::to_string(j.min_width()) + "," + std::to_string(j.max_width()) + "," +
             (j.migratable ? "true" : "false");
    out += "\n";
  }
  FILE* fp = std::fopen(file.c_str(), "wb");
  if (!fp) throw InputError(file.string(), 0, 0, "cannot write");
  bool ok = std::fwrite(out.data(), 1, out.size(), fp) == out.size();
  ok = std::fclose(fp) == 0 && ok;
  if (!ok) throw InputError(file.string(), 0, 0, "write failed");
}

}  // namespace carbon
