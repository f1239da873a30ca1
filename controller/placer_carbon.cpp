// Placer on carbon/'s placement (carbon/include/carbon/placement.h), and the
// intensity source replaying carbon/'s shipped 2023 data.
#include <carbon/catalog.h>
#include <carbon/hardware.h>
#include <carbon/placement.h>

#include <cmath>
#include <mutex>

#include "controller/placement.h"
#include "controller/regions.h"

namespace controller {

namespace {

constexpr int64_t kHourMs = 3600 * 1000;

carbon::Time to_time(int64_t ms) { return carbon::from_unix(ms / 1000); }
int64_t to_ms(carbon::Time t) { return carbon::to_unix(t) * 1000; }

class CarbonPlacer final : public Placer {
 public:
  std::string name() const override { return "carbon"; }

  PlacementDecision place(const PlacementRequest& req, const std::vector<RegionSnapshot>& snaps,
                          int64_t now_ms) const override {
    PlacementDecision d;
    const int64_t now = std::max(now_ms, req.earliest_start_ms);
    // Capacity is in nodes: carbon/ reserves `gpus` resources, we reserve nodes.
    std::vector<carbon::Region> regions;
    std::string why_not;
    bool fits_ever = false;
    for (const auto& s : snaps) {
      bool allowed = std::find(req.allowed.begin(), req.allowed.end(), s.name) != req.allowed.end();
      if (!allowed) continue;
      if (s.capacity_nodes < req.nodes || s.gpus_per_node < req.gpus_per_node) {
        why_not += "; " + s.name + ": has " + std::to_string(s.capacity_nodes) + " nodes x " +
                   std::to_string(s.gpus_per_node) + " GPUs";
        continue;
      }
      fits_ever = true;
      if (s.free_nodes < req.nodes) {
        why_not += "; " + s.name + ": " + std::to_string(s.free_nodes) + " nodes free now";
        continue;
      }
      carbon::Region r;
      r.name = s.name;
      r.capacity = s.free_nodes;
      r.pue = s.pue;
      r.hardware.name = "job-estimate";
      r.hardware.resource = "node";
      r.hardware.resources_per_server = 1;
      r.hardware.resource_tdp_w = req.power_watts;
      r.hardware.resource_idle_w = req.power_watts;
      r.hardware.server_overhead_w = 0;
      r.hardware.embodied_kg_per_server = 0;
      r.hardware.lifetime_years = 1;
      if (!s.hardware.empty()) {
        // SCI M term from the region's servers: a node is one server; power
        // stays the job's own estimate (the profile's TDP is an upper bound).
        const carbon::HardwareProfile& hw = carbon::hardware_profile(s.hardware);
        r.hardware.name = hw.name;
        r.hardware.embodied_kg_per_server = hw.embodied_kg_per_server;
        r.hardware.lifetime_years = hw.lifetime_years;
      }
      std::vector<double> values;
      const int64_t h0 = (now / kHourMs) * kHourMs;
      for (int64_t t = h0; t < h0 + 49 * kHourMs; t += kHourMs) values.push_back(intensity_at(s, t));
      r.forecast = carbon::IntensitySeries(s.name, to_time(h0), carbon::Hours{1}, values);
      regions.push_back(std::move(r));
    }
    if (!fits_ever) {
      d.impossible = true;
      d.explanation = "no allowed region can ever hold " + std::to_string(req.nodes) + " nodes x " +
                      std::to_string(req.gpus_per_node) + " GPUs" + why_not;
      return d;
    }
    if (regions.empty()) {
      d.wait_for_capacity = true;
      d.explanation = "waiting for capacity" + why_not;
      return d;
    }
    carbon::Job job;
    job.id = req.job_id;
    job.gpus = req.nodes;
    job.duration = carbon::Seconds{std::max<int64_t>(1, std::llround(req.duration_s))};
    job.submit = to_time(now);
    job.home_region = req.home_region;
    job.allowed_regions = req.allowed;
    job.interruptible = req.interruptible;
    carbon::PlacementOptions opt;
    opt.max_lookahead = carbon::Hours{48};
    if (req.latest_end_ms > 0) {
      job.deadline = to_time(req.latest_end_ms);
      opt.policy = carbon::Policy::kSpatioTemporal;
    } else {
      opt.policy = carbon::Policy::kSpatial;  // no time slack: the cleanest region now
    }
    carbon::CapacityLedger ledger;
    carbon::Decision c;
    try {
      c = carbon::place(job, regions, ledger, to_time(now), opt);
      if (!c.feasible && opt.policy == carbon::Policy::kSpatioTemporal) {
        opt.policy = carbon::Policy::kSpatial;  // the deadline cannot be met: as early as possible
        c = carbon::place(job, regions, ledger, to_time(now), opt);
        if (c.feasible) c.deadline_met = false;
      }
    } catch (const std::exception& e) {
      d.wait_for_capacity = true;
      d.explanation = std::string("carbon placement failed: ") + e.what();
      return d;
    }
    if (!c.feasible) {
      d.wait_for_capacity = true;
      d.explanation = "carbon placement: " + c.reason;
      return d;
    }
    d.region = c.region;
    for (const auto& w : c.windows) d.windows.push_back({to_ms(w.start), to_ms(w.end)});
    if (d.windows.empty()) d.windows.push_back({to_ms(c.start), to_ms(c.end)});
    if (d.windows.front().first < now) d.windows.front().first = now;
    d.expected_grams = c.expected_grams;
    d.run_now_home_grams = std::isnan(c.run_now_home_grams) ? c.expected_grams : c.run_now_home_grams;
    d.policy = (req.latest_end_ms > 0 && !c.deadline_met) ? "deadline-infeasible"
                                                          : carbon::policy_name(opt.policy);
    d.explanation = c.explanation;
    return d;
  }

 private:
  static double intensity_at(const RegionSnapshot& r, int64_t t) {
    if (r.forecast.empty()) return r.intensity_now;
    double v = r.forecast.front().gco2_per_kwh;
    for (const auto& p : r.forecast) {
      if (p.time_ms > t) break;
      v = p.gco2_per_kwh;
    }
    return v;
  }
};

class CarbonDataSource final : public IntensitySource {
 public:
  std::vector<ForecastPoint> forecast(const std::string& zone, int64_t now_ms, int horizon_h) const override {
    std::lock_guard<std::mutex> l(mu_);
    if (!catalog_) catalog_ = std::make_unique<carbon::Catalog>(carbon::Catalog::load());
    const std::string id = catalog_->resolve(zone);  // throws naming the known zones
    const carbon::IntensitySeries& s = catalog_->series(id);
    std::vector<ForecastPoint> out;
    const int64_t h0 = (now_ms / kHourMs) * kHourMs;
    const int64_t n = int64_t(s.size());
    const int64_t start_h = carbon::to_unix(s.start()) / 3600;
    for (int h = 0; h <= horizon_h; ++h) {
      const int64_t t = h0 + h * kHourMs;
      // The same hour of the (2023) year: hours since the series start, modulo its length.
      int64_t idx = ((t / kHourMs - start_h) % n + n) % n;
      out.push_back({t, s[size_t(idx)]});
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  mutable std::unique_ptr<carbon::Catalog> catalog_;
};

}  // namespace

std::unique_ptr<Placer> make_carbon_placer() { return std::make_unique<CarbonPlacer>(); }
std::unique_ptr<IntensitySource> make_carbon_intensity_source() { return std::make_unique<CarbonDataSource>(); }

}  // namespace controller
