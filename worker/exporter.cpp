#include "worker/exporter.h"

#include "worker/energy.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/text_serializer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <thread>

namespace greenshard {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

struct Exporter::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  httplib::Server server;
  std::thread thread;
  int port = 0;
  prometheus::Labels labels, region_labels;

  prometheus::Counter* steps;
  prometheus::Counter* tokens;
  prometheus::Histogram* step_seconds;
  prometheus::Gauge* loss;
  prometheus::Gauge* val_loss;
  prometheus::Gauge* tokens_per_second;
  prometheus::Gauge* mfu;
  prometheus::Counter* flops;
  prometheus::Gauge* progress;
  prometheus::Gauge* eta;
  prometheus::Gauge* rss;
  prometheus::Gauge* rss_peak;
  prometheus::Gauge* unsharded_peak;
  prometheus::Counter* collective;
  prometheus::Counter* energy;
  prometheus::Counter* cpu_energy = nullptr;
  prometheus::Gauge* intensity;
  prometheus::Counter* operational;
  prometheus::Counter* embodied;
  prometheus::Gauge* sci;
  prometheus::Family<prometheus::Counter>* cpu_energy_family;
  prometheus::Family<prometheus::Gauge>* gpu_util;
  prometheus::Family<prometheus::Gauge>* gpu_mem;
  prometheus::Family<prometheus::Gauge>* gpu_power;
  prometheus::Family<prometheus::Counter>* gpu_energy;

  template <typename B>
  auto& add(B&& builder, const prometheus::Labels& l) {
    return builder.Register(*registry).Add(l);
  }
};

// Counters only move forward: raise c to `total`.
static void raise_to(prometheus::Counter* c, double total) {
  const double d = total - c->Value();
  if (d > 0) c->Increment(d);
}

Exporter::Exporter(const std::string& bind_address, const std::string& job, int rank, const std::string& region)
    : impl_(std::make_unique<Impl>()) {
  auto& i = *impl_;
  i.labels = {{"job", job}, {"rank", std::to_string(rank)}};
  i.region_labels = i.labels;
  i.region_labels["region"] = region;
  auto& r = *i.registry;
  i.steps = &BuildCounter().Name("greenshard_training_steps_total").Help("Optimizer steps done.").Register(r).Add(i.labels);
  i.tokens = &BuildCounter().Name("greenshard_training_tokens_total").Help("Tokens trained on by this rank.").Register(r).Add(i.labels);
  i.step_seconds = &BuildHistogram()
                        .Name("greenshard_training_step_duration_seconds")
                        .Help("Wall time per optimizer step.")
                        .Register(r)
                        .Add(i.labels, prometheus::Histogram::BucketBoundaries{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                                                               5, 10, 30, 60});
  i.loss = &BuildGauge().Name("greenshard_training_loss").Help("Last training loss (mean over ranks).").Register(r).Add(i.labels);
  i.val_loss = &BuildGauge().Name("greenshard_training_validation_loss").Help("Last validation loss.").Register(r).Add(i.labels);
  i.tokens_per_second = &BuildGauge().Name("greenshard_training_tokens_per_second").Help("Tokens per second, all ranks, last step.").Register(r).Add(i.labels);
  i.mfu = &BuildGauge().Name("greenshard_training_mfu_ratio").Help("Model FLOPs utilization against the configured peak.").Register(r).Add(i.labels);
  i.flops = &BuildCounter().Name("greenshard_training_model_flops_total").Help("Model FLOPs done by this rank.").Register(r).Add(i.labels);
  i.progress = &BuildGauge().Name("greenshard_training_progress_ratio").Help("Steps done / total steps.").Register(r).Add(i.labels);
  i.eta = &BuildGauge().Name("greenshard_training_eta_seconds").Help("Estimated seconds to the last step.").Register(r).Add(i.labels);
  i.rss = &BuildGauge().Name("greenshard_memory_resident_bytes").Help("Resident set size of this rank.").Register(r).Add(i.labels);
  i.rss_peak = &BuildGauge().Name("greenshard_memory_resident_peak_bytes").Help("Resident set high-water mark.").Register(r).Add(i.labels);
  i.unsharded_peak = &BuildGauge().Name("greenshard_memory_unsharded_peak_bytes").Help("FSDP unsharded buffers, high-water mark.").Register(r).Add(i.labels);
  i.collective = &BuildCounter().Name("greenshard_collective_seconds_total").Help("Seconds spent waiting in collectives outside forward/backward.").Register(r).Add(i.labels);
  i.energy = &BuildCounter().Name("greenshard_energy_joules_total").Help("IT energy of this rank (GPU + CPU), before PUE.").Register(r).Add(i.labels);
  i.cpu_energy_family = &BuildCounter().Name("greenshard_cpu_energy_joules_total").Help("CPU energy: RAPL package counters, or TDP x utilization when modelled.").Register(r);
  i.intensity = &BuildGauge().Name("greenshard_grid_intensity_grams_per_kwh").Help("Grid carbon intensity in force (gCO2e/kWh).").Register(r).Add(i.region_labels);
  i.operational = &BuildCounter().Name("greenshard_operational_emissions_grams_total").Help("Energy x PUE x grid intensity, integrated (gCO2e).").Register(r).Add(i.region_labels);
  i.embodied = &BuildCounter().Name("greenshard_embodied_emissions_grams_total").Help("Embodied emissions for the time reserved (SCI M, gCO2e).").Register(r).Add(i.region_labels);
  i.sci = &BuildGauge().Name("greenshard_sci_grams_per_1k_tokens").Help("SCI: (operational + embodied) grams per 1000 tokens.").Register(r).Add(i.region_labels);
  i.gpu_util = &BuildGauge().Name("greenshard_gpu_utilization_ratio").Help("GPU utilization (NVML).").Register(r);
  i.gpu_mem = &BuildGauge().Name("greenshard_gpu_memory_used_bytes").Help("GPU memory in use (NVML).").Register(r);
  i.gpu_power = &BuildGauge().Name("greenshard_gpu_power_watts").Help("GPU power draw (NVML).").Register(r);
  i.gpu_energy = &BuildCounter().Name("greenshard_gpu_energy_joules_total").Help("GPU energy since the worker started (NVML).").Register(r);
  // /metrics in the text exposition format, served by cpp-httplib.
  auto registry = i.registry;
  i.server.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus::TextSerializer().Serialize(registry->Collect()), "text/plain; version=0.0.4");
  });
  const auto colon = bind_address.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("metrics: bind address '" + bind_address + "' has no port");
  const std::string host = bind_address.substr(0, colon);
  const int want = std::stoi(bind_address.substr(colon + 1));
  i.port = want == 0 ? i.server.bind_to_any_port(host) : (i.server.bind_to_port(host, want) ? want : -1);
  if (i.port <= 0) throw std::runtime_error("metrics: cannot listen on " + bind_address + " (metrics.port busy?)");
  i.thread = std::thread([&server = i.server] { server.listen_after_bind(); });
}

Exporter::~Exporter() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int Exporter::port() const { return impl_->port; }

void Exporter::on_step(const StepMetrics& m) {
  auto& i = *impl_;
  i.steps->Increment();
  i.tokens->Increment(m.tokens);
  i.step_seconds->Observe(m.step_seconds);
  if (std::isfinite(m.loss)) i.loss->Set(m.loss);
  i.tokens_per_second->Set(m.tokens_per_second);
  i.mfu->Set(m.mfu);
  i.flops->Increment(m.model_flops);
  i.progress->Set(m.progress);
  i.eta->Set(m.eta_seconds);
  if (m.collective_seconds > 0) i.collective->Increment(m.collective_seconds);
}

void Exporter::on_validation(double loss) { impl_->val_loss->Set(loss); }

void Exporter::on_memory(double resident, double resident_peak, double unsharded_peak) {
  impl_->rss->Set(resident);
  impl_->rss_peak->Set(resident_peak);
  impl_->unsharded_peak->Set(unsharded_peak);
}

void Exporter::on_energy(const EnergyReading& r, double it_joules_total) {
  auto& i = *impl_;
  if (!i.cpu_energy) {
    auto l = i.labels;
    l["source"] = r.cpu_source;
    i.cpu_energy = &i.cpu_energy_family->Add(l);
  }
  raise_to(i.cpu_energy, r.cpu_joules);
  raise_to(i.energy, it_joules_total);
  for (const auto& g : r.gpus) {
    auto l = i.labels;
    l["gpu"] = std::to_string(g.index);
    i.gpu_util->Add(l).Set(g.utilization);
    i.gpu_mem->Add(l).Set(g.memory_used_bytes);
    i.gpu_power->Add(l).Set(g.power_watts);
    raise_to(&i.gpu_energy->Add(l), g.energy_joules);
  }
}

void Exporter::on_emissions(double intensity, double operational_grams_total, double embodied_grams_total,
                            double sci_per_1k) {
  auto& i = *impl_;
  i.intensity->Set(intensity);
  raise_to(i.operational, operational_grams_total);
  raise_to(i.embodied, embodied_grams_total);
  if (std::isfinite(sci_per_1k)) i.sci->Set(sci_per_1k);
}

}  // namespace greenshard
