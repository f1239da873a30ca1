#include "worker/energy.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace greenshard {
namespace {

double process_cpu_seconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

bool read_u64(const std::string& path, uint64_t& v) {
  std::ifstream in(path);
  return static_cast<bool>(in >> v);
}

}  // namespace

double EnergyReading::total_joules() const {
  double j = cpu_joules;
  for (const auto& g : gpus) j += g.energy_joules;
  return j;
}

RaplMeter::RaplMeter(std::string root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    // Packages only ("intel-rapl:0"), not their sub-zones ("intel-rapl:0:0").
    if (name.rfind("intel-rapl:", 0) != 0 || name.find(':', 11) != std::string::npos) continue;
    Zone z;
    z.energy_path = (e.path() / "energy_uj").string();
    if (!read_u64(z.energy_path, z.last) || !read_u64((e.path() / "max_energy_range_uj").string(), z.max_range)) continue;
    zones_.push_back(z);
  }
}

double RaplMeter::joules() {
  double total = 0;
  for (auto& z : zones_) {
    uint64_t now = 0;
    if (read_u64(z.energy_path, now)) {
      const uint64_t delta = now >= z.last ? now - z.last : z.max_range - z.last + now;  // wrapped
      z.accumulated += delta / 1e6;
      z.last = now;
    }
    total += z.accumulated;
  }
  return total;
}

// NVML through dlopen: the few entry points we use, declared here.
struct EnergyMeter::Nvml {
  using Ret = int;
  struct Utilization {
    unsigned int gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  void* lib = nullptr;
  void* device = nullptr;
  int index = 0;
  Ret (*init)() = nullptr;
  Ret (*shutdown)() = nullptr;
  Ret (*handle_by_index)(unsigned int, void**) = nullptr;
  Ret (*utilization)(void*, Utilization*) = nullptr;
  Ret (*memory)(void*, Memory*) = nullptr;
  Ret (*power)(void*, unsigned int*) = nullptr;
  Ret (*energy)(void*, unsigned long long*) = nullptr;

  static std::unique_ptr<Nvml> open(int index) {
    auto n = std::make_unique<Nvml>();
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return nullptr;
    auto sym = [&](const char* name) { return dlsym(n->lib, name); };
    n->init = reinterpret_cast<Ret (*)()>(sym("nvmlInit_v2"));
    n->shutdown = reinterpret_cast<Ret (*)()>(sym("nvmlShutdown"));
    n->handle_by_index = reinterpret_cast<Ret (*)(unsigned int, void**)>(sym("nvmlDeviceGetHandleByIndex_v2"));
    n->utilization = reinterpret_cast<Ret (*)(void*, Utilization*)>(sym("nvmlDeviceGetUtilizationRates"));
    n->memory = reinterpret_cast<Ret (*)(void*, Memory*)>(sym("nvmlDeviceGetMemoryInfo"));
    n->power = reinterpret_cast<Ret (*)(void*, unsigned int*)>(sym("nvmlDeviceGetPowerUsage"));
    n->energy = reinterpret_cast<Ret (*)(void*, unsigned long long*)>(sym("nvmlDeviceGetTotalEnergyConsumption"));
    if (!n->init || !n->handle_by_index || n->init() != 0 ||
        n->handle_by_index(static_cast<unsigned int>(index), &n->device) != 0) {
      dlclose(n->lib);
      return nullptr;
    }
    n->index = index;
    return n;
  }
  ~Nvml() {
    if (lib) {
      if (shutdown) shutdown();
      dlclose(lib);
    }
  }
};

EnergyMeter::EnergyMeter(int gpu_index, double cpu_tdp_watts, std::string rapl_root)
    : rapl_(std::move(rapl_root)), cpu_tdp_watts_(cpu_tdp_watts) {
  if (gpu_index >= 0) nvml_ = Nvml::open(gpu_index);
  if (nvml_ && nvml_->energy) {
    unsigned long long mj = 0;
    if (nvml_->energy(nvml_->device, &mj) == 0) gpu_energy_start_mj_ = static_cast<double>(mj);
  }
  last_cpu_s_ = process_cpu_seconds();
  last_wall_ = std::chrono::steady_clock::now();
  ncpu_ = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

EnergyMeter::~EnergyMeter() = default;

bool EnergyMeter::has_gpu() const { return nvml_ != nullptr; }

EnergyReading EnergyMeter::read() {
  EnergyReading r;
  if (rapl_.available()) {
    r.cpu_joules = rapl_.joules();
    r.cpu_source = "rapl";
  } else {
    // Modelled: TDP x (CPU seconds of this process / (wall seconds x CPUs)).
    const double cpu = process_cpu_seconds();
    const auto now = std::chrono::steady_clock::now();
    const double wall = std::chrono::duration<double>(now - last_wall_).count();
    if (wall > 0) {
      const double util = std::min(1.0, (cpu - last_cpu_s_) / (wall * ncpu_));
      modelled_joules_ += cpu_tdp_watts_ * util * wall;
    }
    last_cpu_s_ = cpu;
    last_wall_ = now;
    r.cpu_joules = modelled_joules_;
    r.cpu_source = "modelled";
  }
  if (nvml_) {
    GpuReading g;
    g.index = nvml_->index;
    Nvml::Utilization u{};
    if (nvml_->utilization && nvml_->utilization(nvml_->device, &u) == 0) g.utilization = u.gpu / 100.0;
    Nvml::Memory m{};
    if (nvml_->memory && nvml_->memory(nvml_->device, &m) == 0) g.memory_used_bytes = static_cast<double>(m.used);
    unsigned int mw = 0;
    if (nvml_->power && nvml_->power(nvml_->device, &mw) == 0) g.power_watts = mw / 1000.0;
    unsigned long long mj = 0;
    if (nvml_->energy && nvml_->energy(nvml_->device, &mj) == 0)
      g.energy_joules = (static_cast<double>(mj) - gpu_energy_start_mj_) / 1000.0;  // millijoules -> joules
    r.gpus.push_back(g);
  }
  return r;
}

}  // namespace greenshard
