#include "worker/energy.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace greenshard {
namespace {

bool read_u64(const std::string& path, uint64_t& v) {
  std::ifstream in(path);
  return static_cast<bool>(in >> v);
}

using NvmlRet = int;

}  // namespace

HostCpuTime::HostCpuTime(std::string stat_path) : path_(std::move(stat_path)) {
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz > 0) jiffies_per_s_ = static_cast<double>(hz);
  int n = 0;
  if (sample(start_, n)) ncpu_ = std::max(1, n);
}

bool HostCpuTime::sample(uint64_t& busy, int& ncpu) const {
  std::ifstream in(path_);
  std::string line;
  bool have_total = false;
  ncpu = 0;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) continue;
    if (line.size() > 3 && std::isdigit(static_cast<unsigned char>(line[3]))) {
      ++ncpu;
      continue;
    }
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice
    // (guest time is already inside user and nice)
    std::istringstream ls(line.substr(3));
    uint64_t v[8] = {};
    for (auto& x : v)
      if (!(ls >> x)) return false;
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    have_total = true;
  }
  return have_total;
}

double HostCpuTime::busy_seconds() {
  uint64_t now = 0;
  int n = 0;
  if (!available() || !sample(now, n) || now < start_) return 0;
  return static_cast<double>(now - start_) / jiffies_per_s_;
}

int select_gpu(int local_rank, int nvml_device_count, const char* cuda_visible_devices) {
  if (local_rank < 0 || nvml_device_count <= 0) return -1;
  if (!cuda_visible_devices) return local_rank < nvml_device_count ? local_rank : -1;
  // "2,3" -> local rank 1 uses NVML device 3; "" -> nothing visible.
  std::vector<int> ids;
  std::stringstream ss(cuda_visible_devices);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    if (!std::all_of(item.begin(), item.end(), [](unsigned char c) { return std::isdigit(c); }))
      return -1;  // UUIDs or MIG names: not an NVML index
    // CUDA stops at the first invalid index: what follows is invisible.
    const int id = std::stoi(item);
    if (id >= nvml_device_count) break;
    ids.push_back(id);
  }
  return local_rank < static_cast<int>(ids.size()) ? ids[static_cast<size_t>(local_rank)] : -1;
}

int nvml_device_count() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  auto init = reinterpret_cast<NvmlRet (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlRet (*)()>(dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<NvmlRet (*)(unsigned int*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  unsigned int n = 0;
  if (init && count && init() == 0) {
    if (count(&n) != 0) n = 0;
    if (shutdown) shutdown();
  }
  dlclose(lib);
  return static_cast<int>(n);
}

std::string nvml_device_name(int index) {
  if (index < 0) return "";
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "";
  auto init = reinterpret_cast<NvmlRet (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlRet (*)()>(dlsym(lib, "nvmlShutdown"));
  auto handle = reinterpret_cast<NvmlRet (*)(unsigned int, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<NvmlRet (*)(void*, char*, unsigned int)>(dlsym(lib, "nvmlDeviceGetName"));
  std::string out;
  if (init && handle && name && init() == 0) {
    void* dev = nullptr;
    char buf[96] = {};  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
    if (handle(static_cast<unsigned int>(index), &dev) == 0 && name(dev, buf, sizeof buf) == 0) out = buf;
    if (shutdown) shutdown();
  }
  dlclose(lib);
  return out;
}

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

EnergyMeter::EnergyMeter(EnergyMeterOptions o)
    : rapl_(std::move(o.rapl_root)),
      host_cpu_(std::move(o.proc_stat)),
      cpu_tdp_watts_(o.cpu_tdp_watts),
      share_(1.0 / std::max(1, o.local_world_size)) {
  if (o.gpu_index >= 0) nvml_ = Nvml::open(o.gpu_index);
  if (nvml_ && nvml_->energy) {
    unsigned long long mj = 0;
    if (nvml_->energy(nvml_->device, &mj) == 0) gpu_energy_start_mj_ = static_cast<double>(mj);
  }
}

EnergyMeter::EnergyMeter(int gpu_index, double cpu_tdp_watts)
    : EnergyMeter([&] {
        EnergyMeterOptions o;
        o.gpu_index = gpu_index;
        o.cpu_tdp_watts = cpu_tdp_watts;
        return o;
      }()) {}

EnergyMeter::~EnergyMeter() = default;

bool EnergyMeter::has_gpu() const { return nvml_ != nullptr; }

EnergyReading EnergyMeter::read() {
  EnergyReading r;
  // The host's CPU energy, of which this rank reports its share.
  if (rapl_.available()) {
    r.cpu_joules = share_ * rapl_.joules();
    r.cpu_source = "rapl";
  } else {
    // Modelled: TDP x utilization x wall = TDP x busy CPU-seconds / CPUs.
    r.cpu_joules = host_cpu_.available() ? share_ * cpu_tdp_watts_ * host_cpu_.busy_seconds() / host_cpu_.cpus() : 0;
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
