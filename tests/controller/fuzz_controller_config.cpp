// libFuzzer target for the controller's configuration files: regions.yaml
// (controller/regions.cpp parse_regions_yaml), the carbon source file and the
// hardware file (controller/config_files.cpp parse_carbon_source_yaml,
// apply_hardware_yaml). The first byte picks the parser. Each may only throw
// std::runtime_error naming the file (a YAML::Exception escaping, or any
// other exception or sanitizer report, is a bug). Inputs naming /dev, /proc
// or /sys are skipped: the parsers read the files a config names
// (kubeconfig, token_file, api_key_file), and a FIFO or /dev/zero would hang
// the fuzzer, not find a parser bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <yaml-cpp/yaml.h>

#include "controller/config_files.h"
#include "controller/regions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (text.find("/dev") != std::string::npos || text.find("/proc") != std::string::npos ||
      text.find("/sys") != std::string::npos)
    return 0;
  try {
    switch (data[0] % 3) {
      case 0: {
        controller::RegionsFileOptions o;
        o.service_account_dir = "/nonexistent-greenshard-fuzz-sa";
        auto regions = controller::parse_regions_yaml(text, "regions.yaml", o);
        if (regions.empty()) std::abort();
        break;
      }
      case 1:
        (void)controller::parse_carbon_source_yaml(text, "carbon.yaml");
        break;
      default: {
        std::vector<controller::RegionConfig> regions(2);
        regions[0].name = "DE";
        regions[1].name = "local";
        controller::apply_hardware_yaml(text, "hardware.yaml", regions);
        break;
      }
    }
  } catch (const YAML::Exception& e) {
    std::fprintf(stderr, "YAML::Exception escaped: %s\n", e.what());
    std::abort();  // must be reported as std::runtime_error naming the file
  } catch (const std::runtime_error&) {
  }
  return 0;
}
