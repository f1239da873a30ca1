// libFuzzer target for the controller's configuration files: regions.yaml
// (controller/config/regions.cpp parse_regions_yaml), the carbon source file and the
// hardware file and the quotas file (controller/config/config_files.cpp
// parse_carbon_source_yaml, apply_hardware_yaml, parse_quota_yaml). The
// first byte picks the parser. Each may only throw
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

#include "fuzz_input.h"
#include "controller/config/config_files.h"
#include "controller/config/regions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto input = fuzzing::config_text(data, size);
  if (!input) return 0;
  const std::string& text = *input;
  try {
    switch (data[0] % 4) {
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
      case 2: {
        std::vector<controller::RegionConfig> regions(2);
        regions[0].name = "DE";
        regions[1].name = "local";
        controller::apply_hardware_yaml(text, "hardware.yaml", regions);
        break;
      }
      default: {
        std::vector<controller::RegionConfig> regions(2);
        regions[0].name = "DE";
        regions[0].gpus_per_node = 8;
        regions[1].name = "local";
        const controller::QuotaConfig q = controller::parse_quota_yaml(text, "quotas.yaml", regions);
        controller::QuotaLedger l(q, regions);
        for (const auto& [t, _] : q.tenants) {
          l.add(t, "DE", 1);
          if (l.room(t, "DE") < 0 || l.room(t, "local") < 0) std::abort();  // never negative
          (void)l.explain(t, "DE", 2);
        }
        (void)l.rows();
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
