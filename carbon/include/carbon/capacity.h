// CapacityLedger: resources already planned per region and UTC hour.
//
// Placement reads it (never writes); place_all() and the simulator commit
// decisions with reserve(). Hours are absolute (floor_hour of a Time).
// Per hour even when placement plans sub-hourly slots (placement.h): a
// window reserves every hour it overlaps, so 30-minute windows never
// over-commit an hour.
#pragma once

#include "carbon/time.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace carbon {

struct Window;

class CapacityLedger {
 public:
  // Resources in use in `region` during the hour starting at floor_hour(t).
  int used(const std::string& region, Time t) const;
  // Adds `amount` (may be negative, to release) to every hour overlapping
  // [from, to). Throws CarbonError when usage would go negative.
  void reserve(const std::string& region, Time from, Time to, int amount);
  // Per window: its own region and width when set (Window::region,
  // Window::gpus; a negative amount releases that width), else these.
  void reserve(const std::string& region, const std::vector<Window>& windows, int amount);
  // Usage for hours [first_hour, first_hour + n) into out (resized to n).
  void usage(const std::string& region, Time first_hour, int n, std::vector<int>& out) const;
  void clear() { tracks_.clear(); }

 private:
  struct Track {
    std::int64_t base_hour = 0;   // unix hours of used[0]
    std::vector<int> used;
  };
  std::map<std::string, Track> tracks_;
};

}  // namespace carbon
