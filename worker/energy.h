// Energy meters of one rank. No LibTorch here.
//
// GPU: NVML, loaded at run time (dlopen libnvidia-ml.so.1); without it (or
// without a GPU) there are no GPU readings at all — never invented.
// CPU: RAPL package energy (/sys/class/powercap/intel-rapl:N/energy_uj,
// wrap-around at max_energy_range_uj handled) when readable; otherwise a
// model: TDP x this process's CPU utilization, labelled "modelled".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace greenshard {

struct GpuReading {
  int index = 0;
  double utilization = 0;      // [0, 1]
  double memory_used_bytes = 0;
  double power_watts = 0;
  double energy_joules = 0;    // since the meter started
};

struct EnergyReading {
  double cpu_joules = 0;             // since the meter started
  std::string cpu_source;            // "rapl" or "modelled"
  std::vector<GpuReading> gpus;      // empty without NVML
  double total_joules() const;
};

// Reads RAPL package counters under `root` (default /sys/class/powercap);
// tests point it at a fake sysfs tree.
class RaplMeter {
 public:
  explicit RaplMeter(std::string root = "/sys/class/powercap");
  bool available() const { return !zones_.empty(); }
  // Joules since construction (or the last reset), wrap-around handled.
  double joules();

 private:
  struct Zone {
    std::string energy_path;
    uint64_t max_range = 0, last = 0;
    double accumulated = 0;
  };
  std::vector<Zone> zones_;
};

class EnergyMeter {
 public:
  // gpu_index < 0: no GPU for this rank. cpu_tdp_watts: for the model.
  EnergyMeter(int gpu_index, double cpu_tdp_watts, std::string rapl_root = "/sys/class/powercap");
  ~EnergyMeter();
  EnergyReading read();
  bool has_gpu() const;

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  RaplMeter rapl_;
  double cpu_tdp_watts_;
  double modelled_joules_ = 0;
  double last_cpu_s_ = 0;
  std::chrono::steady_clock::time_point last_wall_;
  int ncpu_ = 1;
  double gpu_energy_start_mj_ = 0;
};

}  // namespace greenshard
