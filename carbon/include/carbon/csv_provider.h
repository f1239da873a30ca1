// CSV intensity files and a provider that replays them.
//
// Two formats, detected from the header line:
//  * Electricity Maps export: columns "Datetime (UTC)", "Zone Id",
//    "Carbon Intensity gCO₂eq/kWh (direct)" (or "(LCA)", chosen by
//    CsvOptions::lifecycle) and optionally "Data Estimated"; other columns
//    are ignored. The zone is the file's "Zone Id" (one zone per file).
//  * Simple: "timestamp,gco2_per_kwh" (optionally a third column
//    "estimated" = true/false). The zone comes from CsvOptions::zone or the
//    file name stem.
// Validation: missing columns, unparseable timestamps or numbers, duplicate
// or unsorted timestamps, negative or non-finite values, rows with the wrong
// number of fields, more than one zone, gaps (unless max_gap_fill allows)
// -> InputError "<file>:<line>:<column>: ...".
// Step: the file's own, never averaged. The spacing of the first two rows
// is the step when it is at most an hour, and it must then be 5, 15, 30 or
// 60 minutes (a longer first spacing is an hourly file with a gap); every
// timestamp must lie on that step's UTC grid (a 30-minute file has rows at
// :00 and :30 only), so a misaligned row or a different step mixed in is an
// error naming its line; a one-row file is hourly when on the hour, else the
// coarsest step whose grid it is on. Hourly files read as before.
#pragma once

#include "carbon/provider.h"

#include <filesystem>
#include <map>

namespace carbon {

struct CsvOptions {
  std::string zone;            // simple format: zone name (default: file stem)
  bool lifecycle = false;      // Electricity Maps format: LCA instead of direct
  int max_gap_fill = 0;        // missing steps tolerated (held last value)
};

// Reads one file (either format) into a series at the file's step.
IntensitySeries read_intensity_csv(const std::filesystem::path& file, const CsvOptions& options = {});
// Same, from text; `name` is used in error messages (and as default zone).
IntensitySeries parse_intensity_csv(const std::string& text, const std::string& name,
                                    const CsvOptions& options = {});
// Writes the simple format ("timestamp,gco2_per_kwh", ISO UTC times).
void write_intensity_csv(const std::filesystem::path& file, const IntensitySeries& series);

// Replays recorded series (any step). current() answers from the recorded
// step containing `now`; after the end of the recording it answers the last
// value marked stale while now - last <= max_age, else throws kStale.
// forecast() returns the recorded future (a perfect forecast, for
// simulation); beyond the recording it throws kNoData.
class CsvProvider : public IntensityProvider {
 public:
  explicit CsvProvider(Seconds max_age = Hours{2}) : max_age_(max_age) {}
  void add(IntensitySeries series);                  // replaces a zone
  void add_file(const std::filesystem::path& file, const CsvOptions& options = {});
  bool has(const std::string& zone) const { return series_.count(zone) != 0; }
  const IntensitySeries& series(const std::string& zone) const;  // throws kNoData

  std::string name() const override { return "csv"; }
  Reading current(const std::string& zone, Time now) override;
  IntensitySeries history(const std::string& zone, Time from, Time to) override;
  Forecast forecast(const std::string& zone, Time now, Hours horizon) override;

 private:
  Seconds max_age_;
  std::map<std::string, IntensitySeries> series_;
};

}  // namespace carbon
