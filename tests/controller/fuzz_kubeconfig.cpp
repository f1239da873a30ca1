// libFuzzer target for the Kubernetes executor's input parsers
// (controller/executors/executor_k8s.cpp): the kubeconfig (parse_kubeconfig; inline
// CA data is written to a private temporary directory) and
// worker-defaults.yaml (parse_worker_defaults). The first byte picks the
// parser. Both may only throw std::runtime_error. Inputs naming /dev, /proc
// or /sys are skipped (tokenFile is read; a FIFO or /dev/zero would hang).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "fuzz_input.h"
#include "controller/executors/executor_k8s.h"

namespace {
std::string ca_dir() {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() / ("greenshard-fuzz-ca-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto input = fuzzing::config_text(data, size);
  if (!input) return 0;
  const std::string& text = *input;
  try {
    if (data[0] & 1) {
      auto k = controller::parse_kubeconfig(text, "kubeconfig", ca_dir());
      if (k.server.empty() || k.token.empty()) std::abort();
    } else {
      (void)controller::parse_worker_defaults(text, "worker-defaults.yaml");
    }
  } catch (const YAML::Exception& e) {
    std::fprintf(stderr, "YAML::Exception escaped: %s\n", e.what());
    std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
