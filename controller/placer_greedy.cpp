// The built-in greedy Placer (placement.h) and plan_grams.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "controller/placement.h"

namespace controller {

namespace {

constexpr int64_t kHourMs = 3600 * 1000;

double intensity_at(const RegionSnapshot& r, int64_t t) {
  if (r.forecast.empty()) return r.intensity_now;
  auto it = std::upper_bound(r.forecast.begin(), r.forecast.end(), t,
                             [](int64_t v, const ForecastPoint& p) { return v < p.time_ms; });
  if (it == r.forecast.begin()) return it->gco2_per_kwh;
  return std::prev(it)->gco2_per_kwh;
}

std::string fmt(double g) {
  std::ostringstream o;
  o.precision(g < 10 ? 3 : 1);
  o << std::fixed << g;
  return o.str();
}

struct Candidate {
  const RegionSnapshot* region = nullptr;
  std::vector<std::pair<int64_t, int64_t>> windows;
  double grams = 0;
};

class GreedyPlacer final : public Placer {
 public:
  std::string name() const override { return "greedy"; }

  PlacementDecision place(const PlacementRequest& req, const std::vector<RegionSnapshot>& regions,
                          int64_t now_ms) const override {
    PlacementDecision d;
    const int64_t now = std::max(now_ms, req.earliest_start_ms);
    const int64_t dur = std::max<int64_t>(1000, int64_t(std::llround(req.duration_s * 1000)));
    const double watts = req.power_watts * req.nodes;

    const RegionSnapshot* home = nullptr;
    for (const auto& r : regions)
      if (r.name == req.home_region) home = &r;
    if (home) d.run_now_home_grams = plan_grams(*home, watts, {{now, now + dur}});

    std::vector<std::string> why_not;
    bool any_fits_ever = false;
    std::optional<Candidate> best;
    for (const auto& name : req.allowed) {
      auto it = std::find_if(regions.begin(), regions.end(),
                             [&](const RegionSnapshot& r) { return r.name == name; });
      if (it == regions.end()) {
        why_not.push_back(name + ": unknown region");
        continue;
      }
      const RegionSnapshot& r = *it;
      if (r.capacity_nodes < req.nodes || r.gpus_per_node < req.gpus_per_node) {
        why_not.push_back(name + ": has " + std::to_string(r.capacity_nodes) + " nodes x " +
                          std::to_string(r.gpus_per_node) + " GPUs");
        continue;
      }
      any_fits_ever = true;
      if (r.free_nodes < req.nodes) {
        why_not.push_back(name + ": " + std::to_string(r.free_nodes) + " nodes free now");
        continue;
      }
      Candidate c = plan_in(r, req, now, dur, watts);
      auto better = [&](const Candidate& a, const Candidate& b) {
        if (std::abs(a.grams - b.grams) > 1e-9) return a.grams < b.grams;
        bool ah = a.region->name == req.home_region, bh = b.region->name == req.home_region;
        if (ah != bh) return ah;
        return a.windows.front().first < b.windows.front().first;
      };
      if (!best || better(c, *best)) best = std::move(c);
    }
    if (!any_fits_ever) {
      d.impossible = true;
      d.explanation = "no allowed region can ever hold " + std::to_string(req.nodes) +
                      " nodes x " + std::to_string(req.gpus_per_node) + " GPUs";
      for (auto& w : why_not) d.explanation += "; " + w;
      return d;
    }
    if (!best) {
      d.wait_for_capacity = true;
      d.explanation = "waiting for capacity";
      for (auto& w : why_not) d.explanation += "; " + w;
      return d;
    }
    d.region = best->region->name;
    d.windows = best->windows;
    d.expected_grams = best->grams;
    const bool shifted = d.windows.front().first > now;
    const bool moved = d.region != req.home_region;
    if (req.latest_end_ms > 0 && d.windows.back().second > req.latest_end_ms)
      d.policy = "deadline-infeasible";
    else if (d.windows.size() > 1)
      d.policy = "carbon-windows";
    else if (shifted)
      d.policy = moved ? "carbon-region-shift" : "carbon-shift";
    else
      d.policy = moved ? "carbon-region" : "run-now-home";
    std::ostringstream o;
    o << "runs in " << d.region << " in " << d.windows.size() << " window(s) starting "
      << (shifted ? std::to_string((d.windows.front().first - now) / 1000) + " s from now"
                  : std::string("now"))
      << ": expected " << fmt(d.expected_grams) << " gCO2e vs " << fmt(d.run_now_home_grams)
      << " gCO2e running now in " << req.home_region;
    if (d.policy == "deadline-infeasible") o << " (the deadline cannot be met; runs as early as possible)";
    d.explanation = o.str();
    return d;
  }

 private:
  static Candidate plan_in(const RegionSnapshot& r, const PlacementRequest& req, int64_t now,
                           int64_t dur, double watts) {
    Candidate c;
    c.region = &r;
    const int64_t latest = req.latest_end_ms;
    if (latest <= 0 || latest - now <= dur) {  // no slack: run now
      c.windows = {{now, now + dur}};
      c.grams = plan_grams(r, watts, c.windows);
      return c;
    }
    if (!req.interruptible) {
      // Every hour boundary (and now) as a start; the cleanest wins, earliest on ties.
      c.windows = {{now, now + dur}};
      c.grams = plan_grams(r, watts, c.windows);
      for (int64_t s = (now / kHourMs + 1) * kHourMs; s + dur <= latest; s += kHourMs) {
        double g = plan_grams(r, watts, {{s, s + dur}});
        if (g < c.grams - 1e-9) {
          c.grams = g;
          c.windows = {{s, s + dur}};
        }
      }
      return c;
    }
    // Interruptible: the cleanest hour slots before the deadline.
    struct Slot { int64_t a, b; double g; };
    std::vector<Slot> slots;
    for (int64_t a = now; a < latest;) {
      int64_t b = std::min(latest, (a / kHourMs + 1) * kHourMs);
      slots.push_back({a, b, intensity_at(r, a)});
      a = b;
    }
    std::stable_sort(slots.begin(), slots.end(), [](const Slot& x, const Slot& y) { return x.g < y.g; });
    int64_t need = dur;
    std::vector<std::pair<int64_t, int64_t>> w;
    for (const auto& s : slots) {
      if (need <= 0) break;
      int64_t take = std::min(need, s.b - s.a);
      w.push_back({s.a, s.a + take});
      need -= take;
    }
    std::sort(w.begin(), w.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (auto p : w) {
      if (!merged.empty() && merged.back().second == p.first) merged.back().second = p.second;
      else merged.push_back(p);
    }
    c.windows = merged;
    c.grams = plan_grams(r, watts, c.windows);
    return c;
  }
};

}  // namespace

double plan_grams(const RegionSnapshot& region, double it_watts,
                  const std::vector<std::pair<int64_t, int64_t>>& windows) {
  double grams = 0;
  for (auto [a, b] : windows) {
    for (int64_t t = a; t < b;) {
      int64_t next = std::min(b, (t / kHourMs + 1) * kHourMs);
      // next forecast point may split the hour
      auto it = std::upper_bound(region.forecast.begin(), region.forecast.end(), t,
                                 [](int64_t v, const ForecastPoint& p) { return v < p.time_ms; });
      if (it != region.forecast.end()) next = std::min(next, it->time_ms);
      double kwh = it_watts * region.pue * double(next - t) / 3.6e9;
      grams += kwh * intensity_at(region, t);
      t = next;
    }
  }
  return grams;
}

std::unique_ptr<Placer> make_greedy_placer() { return std::make_unique<GreedyPlacer>(); }

}  // namespace controller
