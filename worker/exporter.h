// The worker's Prometheus metrics (names and meaning: docs/metrics.md),
// kept in a prometheus-cpp registry and served at /metrics by cpp-httplib
// (the Debian civetweb behind prometheus-cpp's exposer would not start
// inside the worker). No LibTorch here.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Registry;
class Exposer;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace greenshard {

struct EnergyReading;

struct StepMetrics {
  double step_seconds = 0;
  double tokens = 0;         // this rank, this step
  double loss = 0;
  double tokens_per_second = 0;  // all ranks
  double mfu = 0;
  double model_flops = 0;    // this rank, this step
  double progress = 0, eta_seconds = 0;
  double collective_seconds = 0;
};

class Exporter {
 public:
  // bind "0.0.0.0:9400" style; port 0 picks a free one (port() tells).
  Exporter(const std::string& bind_address, const std::string& job, int rank, const std::string& region);
  ~Exporter();
  int port() const;

  void on_step(const StepMetrics& m);
  void on_validation(double loss);
  void on_memory(double resident, double resident_peak, double unsharded_peak);
  // Energy and emissions counters are set from monotonic totals.
  void on_energy(const EnergyReading& r, double it_joules_total);
  void on_emissions(double intensity, double operational_grams_total, double embodied_grams_total, double sci_per_1k);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace greenshard
