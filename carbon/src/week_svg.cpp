#include "carbon/error.h"
#include "carbon/simulator.h"

#include <algorithm>
#include <cstdio>

namespace carbon {

std::string render_week_svg(const SimConfig& config, const PolicyResult& result, Time week_start) {
  const int left = 120, top = 40, row_h = 56, width = 7 * 24 * 6;  // 6 px per hour
  const int n = static_cast<int>(config.regions.size());
  const int W = left + width + 20, H = top + n * row_h + 40;
  Time week_end = week_start + Hours{7 * 24};
  double vmax = 1;
  for (const auto& r : config.regions) {
    const auto& a = config.actual.at(r.zone);
    for (Time t = week_start; t < week_end; t += Hours{1})
      if (t >= a.start() && t < a.end()) vmax = std::max(vmax, a.at(t));
  }
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  s += buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"%d\" y=\"20\" font-size=\"14\">Grid intensity (gCO2/kWh, max %.0f) and %s run windows, week of "
                "%s (data: Electricity Maps, ODbL)</text>\n",
                left, vmax, sim_policy_name(result.policy), format_time(week_start).c_str());
  s += buf;
  for (int d = 0; d <= 7; ++d) {
    int x = left + d * 24 * 6;
    std::snprintf(buf, sizeof buf, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ccc\"/>\n", x, top, x, top + n * row_h);
    s += buf;
    if (d < 7) {
      std::snprintf(buf, sizeof buf, "<text x=\"%d\" y=\"%d\">%s</text>\n", x + 4, top + n * row_h + 16,
                    format_time(week_start + Hours{24 * d}).substr(0, 10).c_str());
      s += buf;
    }
  }
  for (int i = 0; i < n; ++i) {
    const auto& zone = config.regions[i].zone;
    int y0 = top + i * row_h;
    std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%d\">%s</text>\n", y0 + row_h / 2, zone.c_str());
    s += buf;
    // Job windows of this region.
    for (const auto& o : result.outcomes) {
      if (o.region != zone) continue;
      for (const auto& w : o.windows) {
        Time a = std::max(w.start, week_start), b = std::min(w.end, week_end);
        if (b <= a) continue;
        double x0 = left + static_cast<double>((a - week_start).count()) / 600.0;
        double x1 = left + static_cast<double>((b - week_start).count()) / 600.0;
        std::snprintf(buf, sizeof buf,
                      "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#2a9d8f\" fill-opacity=\"0.15\"/>\n",
                      x0, y0 + 4, std::max(0.5, x1 - x0), row_h - 8);
        s += buf;
      }
    }
    const auto& a = config.actual.at(zone);
    std::string pts;
    for (Time t = week_start; t < week_end; t += Hours{1}) {
      if (t < a.start() || t >= a.end()) continue;
      double x = left + static_cast<double>((t - week_start).count()) / 600.0 + 3;
      double y = y0 + row_h - 4 - (row_h - 8) * a.at(t) / vmax;
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x, y);
      pts += buf;
    }
    s += "<polyline fill=\"none\" stroke=\"#e76f51\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    std::snprintf(buf, sizeof buf, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", left, y0 + row_h,
                  left + width, y0 + row_h);
    s += buf;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace carbon
