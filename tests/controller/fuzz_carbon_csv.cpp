// libFuzzer target for the intensity CSV parser (carbon/src/csv_provider.cpp:
// Electricity Maps exports and the simple "timestamp,gco2_per_kwh" format).
// The first byte picks the options (LCA column, gap fill); the rest is the
// file. Errors must be carbon::CarbonError (InputError); an accepted series
// must be non-empty and answer at its start.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "carbon/csv_provider.h"
#include "carbon/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  carbon::CsvOptions o;
  o.lifecycle = data[0] & 1;
  o.max_gap_fill = (data[0] >> 1) & 7;
  if (data[0] & 16) o.zone = "DE";
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    carbon::IntensitySeries s = carbon::parse_intensity_csv(text, "fuzz/DE.csv", o);
    if (s.size() == 0) std::abort();
    (void)s.at(s.start());
  } catch (const carbon::CarbonError&) {
  }
  return 0;
}
