#include "controller/scheduling/metrics.h"

#include "controller/config/regions.h"

#include <carbon/time_ms.h>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>

namespace controller {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> reg = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Gauge>& jobs =
      BuildGauge().Name("greenshard_jobs").Help("Jobs by state").Register(*reg);
  prometheus::Family<prometheus::Histogram>& queue_wait =
      BuildHistogram().Name("greenshard_job_queue_wait_seconds")
          .Help("Time from submission to STARTING").Register(*reg);
  prometheus::Family<prometheus::Histogram>& phase =
      BuildHistogram().Name("greenshard_scheduler_cycle_duration_seconds")
          .Help("Duration of each scheduler cycle phase").Register(*reg);
  prometheus::Family<prometheus::Counter>& cycles =
      BuildCounter().Name("greenshard_scheduler_cycles_total")
          .Help("Scheduler cycles run").Register(*reg);
  prometheus::Family<prometheus::Counter>& decisions =
      BuildCounter().Name("greenshard_scheduler_decisions_total")
          .Help("Placement decisions by policy and outcome").Register(*reg);
  prometheus::Family<prometheus::Counter>& avoided =
      BuildCounter().Name("greenshard_carbon_avoided_grams_total")
          .Help("Expected gCO2e avoided versus running now in the home region").Register(*reg);
  prometheus::Family<prometheus::Gauge>& intensity =
      BuildGauge().Name("greenshard_region_intensity_gco2_per_kwh")
          .Help("Grid carbon intensity now, per region").Register(*reg);
  prometheus::Family<prometheus::Gauge>& forecast =
      BuildGauge().Name("greenshard_region_intensity_forecast_gco2_per_kwh")
          .Help("Grid carbon intensity forecast per region for now + horizon (1h, 6h, 24h)").Register(*reg);
  prometheus::Family<prometheus::Gauge>& forecast_info =
      BuildGauge().Name("greenshard_forecast_info")
          .Help("The forecaster of each zone region's intensity source (value 1)").Register(*reg);
  prometheus::Family<prometheus::Gauge>& forecast_mape =
      BuildGauge().Name("greenshard_forecast_mape_ratio")
          .Help("Mean absolute percentage error (as a ratio) of the last 168 intensity forecasts issued "
                "lead hours before their hour, against the value in force")
          .Register(*reg);
  prometheus::Family<prometheus::Gauge>& forecast_scored =
      BuildGauge().Name("greenshard_forecast_scored")
          .Help("Forecasts in greenshard_forecast_mape_ratio's mean").Register(*reg);
  prometheus::Family<prometheus::Counter>& restarts =
      BuildCounter().Name("greenshard_executor_restarts_total")
          .Help("Gang restarts from checkpoint").Register(*reg);
  prometheus::Family<prometheus::Counter>& resizes =
      BuildCounter().Name("greenshard_job_resizes_total")
          .Help("Elastic jobs' windows started at another width than the window before").Register(*reg);
  prometheus::Family<prometheus::Counter>& migrations =
      BuildCounter().Name("greenshard_job_migrations_total")
          .Help("Migratable jobs' windows started in another region than the window before").Register(*reg);
  prometheus::Family<prometheus::Counter>& change_avoided =
      BuildCounter().Name("greenshard_job_change_avoided_grams_total")
          .Help("Expected gCO2e avoided by the resizes and migrations carried out (planned savings > 0)")
          .Register(*reg);
  prometheus::Family<prometheus::Counter>& requests =
      BuildCounter().Name("greenshard_api_requests_total")
          .Help("API requests by method and status code").Register(*reg);
  prometheus::Family<prometheus::Counter>& submissions =
      BuildCounter().Name("greenshard_job_submissions_total")
          .Help("Jobs accepted").Register(*reg);
  prometheus::Family<prometheus::Counter>& auth_reloads =
      BuildCounter().Name("greenshard_auth_reloads_total")
          .Help("Tokens file reloads put in force (on change or SIGHUP)").Register(*reg);
  prometheus::Family<prometheus::Counter>& auth_reload_failures =
      BuildCounter().Name("greenshard_auth_reload_failures_total")
          .Help("Tokens file reloads refused (unreadable or malformed); the last good tokens stay in force")
          .Register(*reg);
  prometheus::Family<prometheus::Gauge>& quota_nodes =
      BuildGauge().Name("greenshard_tenant_quota_nodes")
          .Help("Nominal quota of nodes per tenant and region (-1: not limited)").Register(*reg);
  prometheus::Family<prometheus::Gauge>& quota_gpus =
      BuildGauge().Name("greenshard_tenant_quota_gpus")
          .Help("Nominal quota of GPUs per tenant and region (-1: not limited)").Register(*reg);
  prometheus::Family<prometheus::Gauge>& usage_nodes =
      BuildGauge().Name("greenshard_tenant_usage_nodes")
          .Help("Nodes a tenant's jobs hold or have reserved, per region").Register(*reg);
  prometheus::Family<prometheus::Gauge>& usage_gpus =
      BuildGauge().Name("greenshard_tenant_usage_gpus")
          .Help("GPUs a tenant's jobs hold or have reserved, per region").Register(*reg);
  prometheus::Family<prometheus::Counter>& preemptions =
      BuildCounter().Name("greenshard_preemptions_total")
          .Help("Jobs stopped at a checkpoint and requeued for a higher-priority job, by the preempted "
                "job's tenant and region")
          .Register(*reg);
  prometheus::Family<prometheus::Gauge>& quota_waiting =
      BuildGauge().Name("greenshard_quota_waiting_jobs")
          .Help("PENDING jobs that wait for their tenant's quota").Register(*reg);
  prometheus::Family<prometheus::Counter>& tls_reloads =
      BuildCounter().Name("greenshard_tls_reloads_total")
          .Help("TLS certificate and key changes put in force without a restart").Register(*reg);
  prometheus::Family<prometheus::Counter>& tls_reload_failures =
      BuildCounter().Name("greenshard_tls_reload_failures_total")
          .Help("TLS certificate or key changes refused (unreadable, not PEM, key mismatch); the pair in force stays")
          .Register(*reg);
  prometheus::Counter& tls_reloads_c = tls_reloads.Add({});
  prometheus::Counter& tls_reload_failures_c = tls_reload_failures.Add({});
  prometheus::Counter& auth_reloads_c = auth_reloads.Add({});
  prometheus::Counter& auth_reload_failures_c = auth_reload_failures.Add({});
  prometheus::Counter& cycles_c = cycles.Add({});
  prometheus::Counter& avoided_c = avoided.Add({});
  prometheus::Counter& submissions_c = submissions.Add({});
  prometheus::Counter& change_avoided_c = change_avoided.Add({});
  prometheus::Histogram& queue_wait_h = queue_wait.Add(
      {}, prometheus::Histogram::BucketBoundaries{1, 10, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400});
  std::mutex mu;  // Family::Add is thread-safe; this guards the bucket lists
  std::mutex hook_mu;  // one render hook at a time
  std::function<void()> hook;
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::set_jobs(const std::string& state, double n) { impl_->jobs.Add({{"state", state}}).Set(n); }
void Metrics::observe_queue_wait(double s) { impl_->queue_wait_h.Observe(s); }
void Metrics::observe_phase(const std::string& phase, double s) {
  impl_->phase
      .Add({{"phase", phase}},
           prometheus::Histogram::BucketBoundaries{1e-5, 1e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1, 5})
      .Observe(s);
}
void Metrics::cycle_done() { impl_->cycles_c.Increment(); }
void Metrics::decision(const std::string& policy, DecisionOutcome outcome) {
  impl_->decisions.Add({{"policy", policy}, {"outcome", std::string(to_string(outcome))}}).Increment();
}
void Metrics::avoided_grams(double g) {
  if (g > 0) impl_->avoided_c.Increment(g);
}
void Metrics::set_intensity(const std::string& region, double v) {
  impl_->intensity.Add({{"region", region}}).Set(v);
}
void Metrics::set_intensity_forecast(const std::string& region, const std::string& horizon, double v) {
  impl_->forecast.Add({{"region", region}, {"horizon", horizon}}).Set(v);
}
void Metrics::set_region_intensities(const std::vector<RegionSnapshot>& regions, int64_t now_ms) {
  for (const auto& r : regions) {
    set_intensity(r.name, r.intensity_now);
    for (int h : kForecastHorizonsH)
      set_intensity_forecast(r.name, std::to_string(h) + "h", forecast_value_at(r, now_ms + h * carbon::kHourMs));
  }
}
void Metrics::set_forecast_stats(const std::vector<RegionConfig>& regions, const IntensitySource& source) {
  const auto stats = source.stats();
  for (const auto& r : regions) {
    if (r.zone.empty()) continue;
    for (const auto& st : stats) {
      if (st.zone != r.zone) continue;
      impl_->forecast_info.Add({{"region", r.name}, {"zone", st.zone}, {"forecaster", st.forecaster}}).Set(1);
      for (const auto& l : st.leads) {
        const std::string lead = std::to_string(l.lead_h) + "h";
        impl_->forecast_mape.Add({{"region", r.name}, {"lead", lead}}).Set(l.mape);
        impl_->forecast_scored.Add({{"region", r.name}, {"lead", lead}}).Set(double(l.points));
      }
    }
  }
}
void Metrics::on_render(std::function<void()> hook) {
  std::lock_guard<std::mutex> l(impl_->hook_mu);
  impl_->hook = std::move(hook);
}
void Metrics::restart(const std::string& executor) {
  impl_->restarts.Add({{"executor", executor}}).Increment();
}
void Metrics::resized(int from_nodes, int to_nodes) {
  if (from_nodes == to_nodes) return;
  impl_->resizes.Add({{"direction", to_nodes > from_nodes ? "grow" : "shrink"}}).Increment();
}
void Metrics::migrated(const std::string& from_region, const std::string& to_region) {
  if (from_region == to_region) return;
  impl_->migrations.Add({{"from", from_region}, {"to", to_region}}).Increment();
}
void Metrics::change_avoided_grams(double g) {
  if (g > 0) impl_->change_avoided_c.Increment(g);
}
void Metrics::set_tenant_quota(const std::string& tenant, const std::string& region, int quota_nodes,
                               int quota_gpus, int used_nodes, int used_gpus) {
  const prometheus::Labels l{{"tenant", tenant}, {"region", region}};
  impl_->quota_nodes.Add(l).Set(quota_nodes);
  impl_->quota_gpus.Add(l).Set(quota_gpus);
  impl_->usage_nodes.Add(l).Set(used_nodes);
  impl_->usage_gpus.Add(l).Set(used_gpus);
  impl_->preemptions.Add(l);  // a known tenant's counter exists from 0
}
void Metrics::set_quota_waiting(const std::string& tenant, int jobs) {
  impl_->quota_waiting.Add({{"tenant", tenant}}).Set(jobs);
}
void Metrics::preempted(const std::string& tenant, const std::string& region) {
  impl_->preemptions.Add({{"tenant", tenant}, {"region", region}}).Increment();
}
void Metrics::request(const std::string& method, int code) {
  impl_->requests.Add({{"method", method}, {"code", std::to_string(code)}}).Increment();
}
void Metrics::submitted() { impl_->submissions_c.Increment(); }
void Metrics::tls_reloaded(bool ok) { (ok ? impl_->tls_reloads_c : impl_->tls_reload_failures_c).Increment(); }
void Metrics::auth_reloaded(bool ok) { (ok ? impl_->auth_reloads_c : impl_->auth_reload_failures_c).Increment(); }

std::string Metrics::render() const {
  {
    std::lock_guard<std::mutex> l(impl_->hook_mu);
    if (impl_->hook) impl_->hook();
  }
  prometheus::TextSerializer s;
  return s.Serialize(impl_->reg->Collect());
}

}  // namespace controller
