#include "carbon/capacity.h"

#include "carbon/error.h"
#include "carbon/placement.h"

#include <algorithm>

namespace carbon {

namespace {
std::int64_t unix_hour(Time t) {
  auto s = to_unix(t);
  return s >= 0 ? s / 3600 : -((-s + 3599) / 3600);
}
}  // namespace

int CapacityLedger::used(const std::string& region, Time t) const {
  auto it = tracks_.find(region);
  if (it == tracks_.end()) return 0;
  auto h = unix_hour(t) - it->second.base_hour;
  if (h < 0 || h >= static_cast<std::int64_t>(it->second.used.size())) return 0;
  return it->second.used[static_cast<size_t>(h)];
}

void CapacityLedger::reserve(const std::string& region, Time from, Time to, int amount) {
  if (to <= from || amount == 0) return;
  std::int64_t h0 = unix_hour(from), h1 = unix_hour(ceil_hour(to));
  auto& tr = tracks_[region];
  if (tr.used.empty()) tr.base_hour = h0;
  if (h0 < tr.base_hour) {
    tr.used.insert(tr.used.begin(), static_cast<size_t>(tr.base_hour - h0), 0);
    tr.base_hour = h0;
  }
  if (h1 - tr.base_hour > static_cast<std::int64_t>(tr.used.size())) tr.used.resize(static_cast<size_t>(h1 - tr.base_hour), 0);
  for (auto h = h0; h < h1; ++h) {
    int& u = tr.used[static_cast<size_t>(h - tr.base_hour)];
    if (u + amount < 0)
      throw CarbonError("capacity ledger: releasing more than reserved in " + region + " at " + format_time(from_unix(h * 3600)));
  }
  for (auto h = h0; h < h1; ++h) tr.used[static_cast<size_t>(h - tr.base_hour)] += amount;
}

void CapacityLedger::reserve(const std::string& region, const std::vector<Window>& windows, int amount) {
  for (const auto& w : windows) {
    int a = amount;
    if (w.gpus > 0) a = amount < 0 ? -w.gpus : w.gpus;
    reserve(w.region.empty() ? region : w.region, w.start, w.end, a);
  }
}

void CapacityLedger::usage(const std::string& region, Time first_hour, int n, std::vector<int>& out) const {
  out.assign(static_cast<size_t>(std::max(n, 0)), 0);
  auto it = tracks_.find(region);
  if (it == tracks_.end()) return;
  const auto& tr = it->second;
  std::int64_t h0 = unix_hour(first_hour);
  for (int i = 0; i < n; ++i) {
    auto k = h0 + i - tr.base_hour;
    if (k >= 0 && k < static_cast<std::int64_t>(tr.used.size())) out[static_cast<size_t>(i)] = tr.used[static_cast<size_t>(k)];
  }
}

}  // namespace carbon
