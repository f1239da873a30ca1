// Prometheus metrics of the controller, rendered in the text exposition
// format for GET /metrics. Names follow promtool's conventions (base units,
// _total counters, _seconds durations); `promtool check metrics` passes on
// render() (tested).
//
//   greenshard_jobs{state}                             gauge
//   greenshard_job_queue_wait_seconds                  histogram (submit -> STARTING)
//   greenshard_scheduler_cycle_duration_seconds{phase} histogram
//   greenshard_scheduler_cycles_total                  counter
//   greenshard_scheduler_decisions_total{policy,outcome} counter
//   greenshard_carbon_avoided_grams_total              counter (run-now-at-home - plan)
//   greenshard_region_intensity_gco2_per_kwh{region}   gauge
//   greenshard_region_intensity_forecast_gco2_per_kwh{region,horizon}  gauge
//                                    (forecast for now + 1h | 6h | 24h)
//   greenshard_forecast_info{region,zone,forecaster}   gauge (1; `zone:` regions: the
//                                    forecaster of the intensity source)
//   greenshard_forecast_mape_ratio{region,lead}        gauge (mean |forecast - actual| /
//                                    actual of the last 168 forecasts issued lead (1h | 6h |
//                                    24h) before their hour, scored once the hour has passed;
//                                    NaN before the first)
//   greenshard_forecast_scored{region,lead}            gauge (forecasts in that mean)
//   greenshard_executor_restarts_total{executor}       counter
//   greenshard_job_resizes_total{direction}            counter (elastic jobs: a window
//                                    started at another width; direction grow | shrink)
//   greenshard_job_migrations_total{from,to}           counter (a window started in
//                                    another region)
//   greenshard_job_change_avoided_grams_total          counter (the expected gCO2e those
//                                    changes avoid, carbon::PlanChange::saved_grams; a
//                                    change planned at a loss (< 0) adds nothing: a counter
//                                    never falls)
//   greenshard_api_requests_total{method,code}         counter
//   greenshard_job_submissions_total                   counter
//   greenshard_auth_reloads_total                      counter (tokens file reloads put in force)
//   greenshard_auth_reload_failures_total              counter (reloads refused; the last good
//                                    table stays in force)
//   greenshard_tls_reloads_total                       counter (TLS certificate/key changes put in force)
//   greenshard_tls_reload_failures_total               counter (changes refused; the pair in force stays)
//   greenshard_tenant_quota_nodes{tenant,region}       gauge (nominal quota; -1 = not limited)
//   greenshard_tenant_quota_gpus{tenant,region}        gauge (nominal quota; -1 = not limited)
//   greenshard_tenant_usage_nodes{tenant,region}       gauge (held or reserved by its jobs)
//   greenshard_tenant_usage_gpus{tenant,region}        gauge
//   greenshard_preemptions_total{tenant,region}        counter (jobs of the tenant stopped,
//                                    checkpointed and requeued for a higher-priority job)
//   greenshard_quota_waiting_jobs{tenant}              gauge (PENDING jobs held by the tenant's quota)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "controller/core/decision_outcome.h"
#include "controller/core/region_snapshot.h"
#include "controller/config/regions.h"

namespace controller {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  void set_jobs(const std::string& state, double n);
  void observe_queue_wait(double seconds);
  void observe_phase(const std::string& phase, double seconds);
  void cycle_done();
  void decision(const std::string& policy, DecisionOutcome outcome);
  void avoided_grams(double grams);  // ignored when <= 0
  void set_intensity(const std::string& region, double gco2_per_kwh);
  // horizon: "1h", "6h", "24h" (kForecastHorizonsH); NaN when the forecast
  // does not reach that far.
  void set_intensity_forecast(const std::string& region, const std::string& horizon, double gco2_per_kwh);
  static constexpr int kForecastHorizonsH[] = {1, 6, 24};
  // Both intensity gauges of every region from snapshots taken at or before
  // now_ms (forecast_value_at(region, now_ms + horizon)).
  void set_region_intensities(const std::vector<RegionSnapshot>& regions, int64_t now_ms);
  // The forecast gauges of every `zone:` region from source.stats() (a zone
  // the source has not forecast yet is left out).
  void set_forecast_stats(const std::vector<RegionConfig>& regions, const IntensitySource& source);
  // Called at the start of every render() (e.g. to refresh gauges from the
  // scheduler's last snapshot). One hook; a later call replaces it.
  void on_render(std::function<void()> hook);
  void restart(const std::string& executor);
  // An elastic job's window started with a change (from the planned change).
  void resized(int from_nodes, int to_nodes);
  void migrated(const std::string& from_region, const std::string& to_region);
  void change_avoided_grams(double grams);  // ignored when <= 0
  void request(const std::string& method, int code);
  void submitted();
  // A tokens file reload (AuthReloader): ok = put in force, else refused.
  void auth_reloaded(bool ok);
  void tls_reloaded(bool ok);
  void set_tenant_quota(const std::string& tenant, const std::string& region, int quota_nodes, int quota_gpus,
                        int used_nodes, int used_gpus);
  void set_quota_waiting(const std::string& tenant, int jobs);
  void preempted(const std::string& tenant, const std::string& region);
  std::string render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace controller
