// libFuzzer target for the worker's job spec (worker/config.cpp): a JSON or
// YAML document through apply_config_text, then validate(), then the
// resolved config's JSON form back through apply_config_text. Both may only
// throw ConfigError (std::invalid_argument); anything else (a YAML or JSON
// exception, std::out_of_range, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "worker/spec/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  greenshard::JobConfig c;
  try {
    greenshard::apply_config_text(c, text, "fuzz.yaml");
  } catch (const greenshard::ConfigError&) {
    return 0;
  }
  try {
    greenshard::validate(c);
  } catch (const greenshard::ConfigError&) {
    return 0;
  }
  // A valid config's own JSON must read back to the same config.
  const std::string json = greenshard::to_json(c);
  greenshard::JobConfig d;
  greenshard::apply_config_text(d, json, "resolved.json");
  if (greenshard::to_json(d) != json) std::abort();
  return 0;
}
