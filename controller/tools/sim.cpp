// greenshard-sim: replays a job trace over recorded grid data and compares
// placement policies. See docs/carbon.md ("Simulator").
//
// Two engines: `library` runs carbon::simulate (every policy and the
// oracle); `service` replays the trace through the controller's own
// Scheduler (controller/tools/sim_engine.h: the code the service runs), for every
// policy but the oracle, which stays the library's lower bound. `both` runs
// the library's rows, then the service's.
//
// --data DIR may hold 5-, 15-, 30- or 60-minute files (carbon/catalog.h):
// both engines then plan at the finest step among the regions (on 30-minute
// data runs and windows start on :00 or :30; docs/carbon.md, "Sub-hourly
// end to end").
//
//   greenshard-sim [--data DIR] [--regions Z1,Z2,...] [--capacity GPUS] [--pue X]
//                  [--hardware NAME] [--trace FILE | --seed N --jobs-per-workday X
//                  --from DATE --to DATE] [--write-trace FILE] [--forecast SPEC]
//                  [--policies p1,p2,...] [--max-windows N] [--lookahead-h N]
//                  [--csv FILE] [--jobs-csv FILE] [--svg FILE] [--week DATE]
//                  [--engine library|service|both] [--store FILE]
//
// Its placement settings default to the controller's (SchedulerOptions and
// a `source: file` carbon source: look-ahead, re-planning period,
// forecaster, capacity pricing, windows); it prints them on a
// "# placement:" line, as the controller logs them at start.
#include <carbon/catalog.h>
#include <carbon/error.h>
#include <carbon/hardware.h>
#include <carbon/simulator.h>
#include <carbon/time_ms.h>
#include <carbon/trace.h>

#include "controller/config/config_files.h"
#include "controller/scheduling/scheduler.h"
#include "controller/tools/sim_engine.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "greenshard-sim: %s\n"
               "usage: greenshard-sim [--data DIR] [--regions Z1,Z2,...] [--capacity GPUS] [--pue X]\n"
               "         [--hardware h100-sxm-8|h200-sxm-8|a100-sxm-8|cpu-2s]\n"
               "         [--trace FILE | --seed N --jobs-per-workday X --from DATE --to DATE]\n"
               "         [--write-trace FILE] [--forecast perfect|persistence|seasonal24|seasonal168|blend[+noiseP]]\n"
               "         [--policies fifo,temporal,spatial,spatio-temporal,oracle] [--max-windows N]\n"
               "         [--lookahead-h N] [--prefer-earlier F] [--capacity-price W] [--replan-every-h N]\n"
               "         [--replan incremental|full] [--replan-threshold F] [--csv FILE] [--jobs-csv FILE] [--svg FILE] [--week DATE]\n"
               "         [--engine library|service|both] [--store FILE]\n",
               msg.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

double number(const std::string& flag, const std::string& v, double lo) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x) || x < lo)
    usage(flag + ": expected a number >= " + std::to_string(lo) + ", got '" + v + "'");
  return x;
}

carbon::Time date(const std::string& flag, const std::string& v) {
  carbon::Time t;
  if (!carbon::parse_time(v, &t)) usage(flag + ": expected a UTC date or timestamp, got '" + v + "'");
  return t;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw carbon::CarbonError("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") usage("help");
    if (a.rfind("--", 0) != 0) usage("unexpected argument '" + a + "'");
    std::string v;
    auto eq = a.find('=');
    if (eq != std::string::npos) v = a.substr(eq + 1), a = a.substr(0, eq);
    else if (i + 1 < argc) v = argv[++i];
    else usage("missing value for " + a);
    static const char* known[] = {"--data", "--regions", "--capacity", "--pue", "--hardware", "--trace", "--seed",
                                  "--jobs-per-workday", "--from", "--to", "--write-trace", "--forecast", "--policies",
                                  "--max-windows", "--lookahead-h", "--prefer-earlier", "--capacity-price", "--replan-every-h", "--replan", "--replan-threshold", "--csv", "--jobs-csv", "--svg", "--week",
                                  "--engine", "--store"};
    bool ok = false;
    for (auto k : known) ok = ok || a == k;
    if (!ok) usage("unknown flag '" + a + "'");
    flags[a] = v;
  }
  auto get = [&](const std::string& k, const std::string& def) { return flags.count(k) ? flags[k] : def; };
  try {
    auto dir = flags.count("--data") ? std::filesystem::path(flags["--data"]) : carbon::builtin_data_dir();
    auto all = carbon::Catalog::load(dir, flags.count("--regions") ? split(flags["--regions"]) : std::vector<std::string>{});
    carbon::SimConfig cfg;
    int capacity = static_cast<int>(number("--capacity", get("--capacity", "1024"), 0));
    double pue = number("--pue", get("--pue", "1.2"), 1.0);
    const auto& hw = carbon::hardware_profile(get("--hardware", "h100-sxm-8"));
    for (const auto& z : all.zones()) {
      cfg.regions.push_back({z.id, capacity, pue, hw});
      cfg.actual[z.id] = all.series(z.id);
    }
    auto seed = static_cast<std::uint64_t>(number("--seed", get("--seed", "1"), 0));
    // The controller's settings unless a flag says otherwise: the same
    // SchedulerOptions and carbon source defaults (the forecaster of a
    // `source: file` carbon source).
    controller::SchedulerOptions so_eff;
    const std::string forecast = get("--forecast", controller::CarbonSourceConfig{}.forecaster);
    cfg.forecaster = carbon::make_forecaster(forecast, seed);
    auto& pl = so_eff.placement;
    auto num = [&](const char* flag, double def, double min) { return flags.count(flag) ? number(flag, flags[flag], min) : def; };
    pl.max_windows = static_cast<int>(num("--max-windows", pl.max_windows, 1));
    pl.prefer_earlier_within = num("--prefer-earlier", pl.prefer_earlier_within, 0);
    // Re-plans place again only the jobs whose inputs changed (carbon/replan.h), or all of them.
    const std::string replan_mode = get("--replan", so_eff.replan.incremental ? "incremental" : "full");
    if (replan_mode != "incremental" && replan_mode != "full")
      usage("--replan: expected incremental or full, got '" + replan_mode + "'");
    so_eff.replan.incremental = replan_mode == "incremental";
    so_eff.replan.forecast_threshold = num("--replan-threshold", so_eff.replan.forecast_threshold, 0);
    cfg.replan = so_eff.replan;
    // Capacity pricing of the spatio-temporal policy (0 = off).
    pl.capacity_price_weight = num("--capacity-price", pl.capacity_price_weight, 0);
    pl.max_lookahead = carbon::Hours{static_cast<long>(num("--lookahead-h", double(pl.max_lookahead.count()), 24))};
    const long replan_h = static_cast<long>(num("--replan-every-h", double(so_eff.replan_period_ms / carbon::kHourMs), 0));
    so_eff.replan_period_ms = replan_h * carbon::kHourMs;
    cfg.placement = pl;
    cfg.replan_every = carbon::Hours{replan_h};
    cfg.learn_expected_load = so_eff.learn_expected_load && pl.capacity_price_weight > 0;
    cfg.load_learning_rate = so_eff.load_learning_rate;

    std::vector<carbon::Job> trace;
    if (flags.count("--trace")) {
      trace = carbon::read_trace_csv(flags["--trace"]);
      for (auto& j : trace) {
        j.home_region = all.resolve(j.home_region);
        for (auto& z : j.allowed_regions) z = all.resolve(z);
      }
    } else {
      carbon::TraceOptions to;
      to.seed = seed;
      to.regions = all.ids();
      to.from = date("--from", get("--from", "2023-01-09"));
      to.to = date("--to", get("--to", "2023-12-16"));
      to.jobs_per_workday = number("--jobs-per-workday", get("--jobs-per-workday", "60"), 0);
      trace = carbon::generate_trace(to);
    }
    if (flags.count("--write-trace")) carbon::write_trace_csv(flags["--write-trace"], trace);
    std::vector<carbon::SimPolicy> policies;
    for (const auto& p : split(get("--policies", "fifo,temporal,spatial,spatio-temporal,oracle")))
      policies.push_back(carbon::parse_sim_policy(p));
    const std::string engine = get("--engine", "library");
    if (engine != "library" && engine != "service" && engine != "both")
      usage("--engine: expected library, service or both, got '" + engine + "'");
    if (flags.count("--store") && engine == "library") usage("--store: only with --engine service or both");

    std::printf("# greenshard-sim: %zu jobs, %zu regions x %d %s (%s, PUE %.2f), forecast %s\n", trace.size(),
                cfg.regions.size(), capacity, hw.resource.c_str(), hw.name.c_str(), pue, cfg.forecaster->name().c_str());
    std::printf("# intensity: %s\n", all.describe().c_str());
    std::printf("# placement: %s\n", controller::describe_placement_settings(so_eff).c_str());
    std::printf("# engine: %s\n", engine.c_str());
    std::vector<carbon::PolicyResult> results;
    if (engine != "service") results = carbon::compare_policies(trace, cfg, policies);
    if (engine != "library") {
      controller::ServiceSimOptions so;
      so.forecaster = forecast;
      so.seed = seed;
      so.replan_period_ms = int64_t(cfg.replan_every.count()) * carbon::kHourMs;
      if (flags.count("--store")) so.store_path = flags["--store"];
      auto service = [&](carbon::SimPolicy p) {
        so.policy = p == carbon::SimPolicy::kFifo       ? carbon::Policy::kRunNowHome
                    : p == carbon::SimPolicy::kTemporal ? carbon::Policy::kTemporal
                    : p == carbon::SimPolicy::kSpatial  ? carbon::Policy::kSpatial
                                                        : carbon::Policy::kSpatioTemporal;
        return controller::simulate_service(trace, cfg, all, so);
      };
      // The baseline: the library's FIFO when it ran, else the service's.
      const bool own_fifo = results.empty();
      std::vector<carbon::PolicyResult> rows;
      if (own_fifo) rows.push_back(service(carbon::SimPolicy::kFifo));
      for (auto p : policies) {
        if (p == carbon::SimPolicy::kOracle) {
          if (own_fifo) rows.push_back(carbon::simulate(trace, cfg, p));  // the bound stays the library's
          continue;
        }
        if (p == carbon::SimPolicy::kFifo && own_fifo) continue;
        rows.push_back(service(p));
      }
      const double base = own_fifo ? rows.front().total_grams : results.front().total_grams;
      for (auto& r : rows) r.saved_pct_vs_fifo = base > 0 ? 100.0 * (base - r.total_grams) / base : 0.0;
      results.insert(results.end(), rows.begin(), rows.end());
    }
    std::printf("%s\n", carbon::format_results_table(results).c_str());
    std::printf("%s", carbon::format_region_load_table(results, all.ids()).c_str());
    if (cfg.replan_every.count() > 0) {
      std::printf("\n# re-plans every %ld h (%s, forecast threshold %.2f): held plans placed again / left untouched:",
                  static_cast<long>(cfg.replan_every.count()), cfg.replan.incremental ? "incremental" : "full",
                  cfg.replan.forecast_threshold);
      for (const auto& r : results)
        if (r.engine == "library" && r.policy != carbon::SimPolicy::kOracle)
          std::printf(" %s %ld / %ld;", carbon::sim_policy_name(r.policy), r.replan_placed, r.replan_untouched);
      std::printf("\n");
    }
    if (flags.count("--csv")) write(flags["--csv"], carbon::results_csv(results));
    if (flags.count("--jobs-csv")) {
      std::string s = "policy,job,region,start,end,windows,grams,expected_grams,delay_h,deadline_missed,fallback\n";
      char buf[256];
      for (const auto& r : results)
        for (const auto& o : r.outcomes) {
          std::snprintf(buf, sizeof buf, ",%zu,%.3f,%.3f,%.3f,%s,%s\n", o.windows.size(), o.grams, o.expected_grams,
                        o.delay_h, o.deadline_missed ? "true" : "false", o.fallback ? "true" : "false");
          s += std::string(carbon::sim_policy_name(r.policy)) + (r.engine == "library" ? "" : "@" + r.engine) +
               "," + o.job_id + "," + o.region + "," +
               carbon::format_time(o.windows.front().start) + "," + carbon::format_time(o.windows.back().end) + buf;
        }
      write(flags["--jobs-csv"], s);
    }
    if (flags.count("--svg")) {
      carbon::Time week = flags.count("--week") ? date("--week", flags["--week"])
                                                : (trace.empty() ? carbon::Time{} : std::chrono::floor<std::chrono::days>(trace.front().submit));
      const carbon::PolicyResult* pick = &results.back();
      for (const auto& r : results)
        if (r.policy == carbon::SimPolicy::kSpatioTemporal) pick = &r;
      write(flags["--svg"], carbon::render_week_svg(cfg, *pick, week));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "greenshard-sim: %s\n", e.what());
    return 1;
  }
}
