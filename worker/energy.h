// Energy meters of one rank. No LibTorch here.
//
// GPU: NVML, loaded at run time (dlopen libnvidia-ml.so.1); without it (or
// without a GPU) there are no GPU readings at all — never invented. Each rank
// meters its own GPU (select_gpu: LOCAL_RANK's device).
// CPU: the host's package energy is shared by every rank on the host, so it
// is metered for the host and each local rank reports its share
// (1 / LOCAL_WORLD_SIZE): summed over the ranks, the host counts once.
// RAPL package energy (/sys/class/powercap/intel-rapl:N/energy_uj,
// wrap-around at max_energy_range_uj handled) when readable; otherwise a
// model: TDP x the host's CPU utilization (busy time in /proc/stat),
// labelled "modelled".
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

// The host's CPU busy time from a /proc/stat style file: the "cpu" line's
// user+nice+system+irq+softirq+steal jiffies, in CPU-seconds summed over
// the CPUs, and the number of "cpuN" lines. available() is false when the
// file is unreadable.
class HostCpuTime {
 public:
  explicit HostCpuTime(std::string stat_path = "/proc/stat");
  bool available() const { return ncpu_ > 0; }
  int cpus() const { return ncpu_; }
  // Busy CPU-seconds since construction (0 when unreadable).
  double busy_seconds();

 private:
  bool sample(uint64_t& busy_jiffies, int& ncpu) const;
  std::string path_;
  uint64_t start_ = 0;
  int ncpu_ = 0;
  double jiffies_per_s_ = 100;
};

// The NVML device index of the GPU a rank uses: LOCAL_RANK's device, through
// CUDA_VISIBLE_DEVICES when that is a list of indices (CUDA renumbers the
// visible devices 0..n-1; NVML does not). -1 (no GPU series) when NVML
// reports no device, the rank has no visible device, or CUDA_VISIBLE_DEVICES
// names devices by UUID (never a guess at the wrong GPU).
// cuda_visible_devices: nullptr when the variable is unset.
int select_gpu(int local_rank, int nvml_device_count, const char* cuda_visible_devices);

// Devices NVML reports (dlopen libnvidia-ml.so.1, nvmlInit, nvmlDeviceGetCount);
// 0 when the library cannot be loaded or initialised.
int nvml_device_count();
// NVML's name of device `index` ("NVIDIA H200"); "" without NVML or for a
// bad index.
std::string nvml_device_name(int index);

struct EnergyMeterOptions {
  int gpu_index = -1;             // < 0: no GPU for this rank (select_gpu)
  double cpu_tdp_watts = 65;      // host CPU power at full load, for the model
  int local_world_size = 1;       // ranks sharing this host's CPU package
  std::string rapl_root = "/sys/class/powercap";
  std::string proc_stat = "/proc/stat";
};

class EnergyMeter {
 public:
  explicit EnergyMeter(EnergyMeterOptions options);
  // One rank alone on its host (bench/gpu uses this form).
  EnergyMeter(int gpu_index, double cpu_tdp_watts);
  ~EnergyMeter();
  // cpu_joules: this rank's share of the host CPU energy since the start.
  EnergyReading read();
  bool has_gpu() const;

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  RaplMeter rapl_;
  HostCpuTime host_cpu_;
  double cpu_tdp_watts_;
  double share_ = 1;
  double gpu_energy_start_mj_ = 0;
};

}  // namespace greenshard
