#include "controller/config/quota.h"

#include <algorithm>
#include <set>

namespace controller {

const TenantQuota* QuotaConfig::of(const std::string& tenant) const {
  auto it = tenants.find(tenant);
  if (it != tenants.end()) return &it->second;
  return default_quota ? &*default_quota : nullptr;
}

QuotaLedger::QuotaLedger(const QuotaConfig& config, const std::vector<RegionConfig>& regions) : config_(config) {
  for (const auto& r : regions) gpus_per_node_[r.name] = r.gpus_per_node;
}

int QuotaLedger::gpus_per_node(const std::string& region) const {
  auto it = gpus_per_node_.find(region);
  return it == gpus_per_node_.end() ? 0 : it->second;
}

void QuotaLedger::add(const std::string& tenant, const std::string& region, int nodes) {
  if (nodes > 0) used_[{tenant, region}] += nodes;
}

void QuotaLedger::release(const std::string& tenant, const std::string& region, int nodes) {
  auto it = used_.find({tenant, region});
  if (nodes > 0 && it != used_.end()) it->second = std::max(0, it->second - nodes);
}

int QuotaLedger::used_nodes(const std::string& tenant, const std::string& region) const {
  auto it = used_.find({tenant, region});
  return it == used_.end() ? 0 : it->second;
}

int QuotaLedger::room(const std::string& tenant, const std::string& region) const {
  const TenantQuota* q = config_.of(tenant);
  if (!q) return INT_MAX;
  auto it = q->find(region);
  if (it == q->end()) return 0;
  const int used = used_nodes(tenant, region);
  int room = INT_MAX;
  if (it->second.nodes) room = std::min(room, *it->second.nodes - used);
  const int g = gpus_per_node(region);
  if (it->second.gpus && g > 0) room = std::min(room, *it->second.gpus / g - used);
  return std::max(0, room);
}

std::string QuotaLedger::explain(const std::string& tenant, const std::string& region, int nodes) const {
  const TenantQuota* q = config_.of(tenant);
  const std::string need = "; the job needs " + std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
  if (!q) return tenant + " has no quota limit in " + region;
  auto it = q->find(region);
  if (it == q->end()) return tenant + " has no quota in " + region + need;
  const int used = used_nodes(tenant, region), g = gpus_per_node(region);
  std::string s = tenant + " uses " + std::to_string(used);
  if (it->second.nodes) s += " of " + std::to_string(*it->second.nodes);
  s += " nodes";
  if (g > 0) {
    s += ", " + std::to_string(used * g);
    if (it->second.gpus) s += " of " + std::to_string(*it->second.gpus);
    s += " GPUs";
  }
  return s + " in " + region + need;
}

std::vector<QuotaLedger::Row> QuotaLedger::rows() const {
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& [t, q] : config_.tenants)
    for (const auto& [r, _] : q) keys.insert({t, r});
  for (const auto& [k, _] : used_) keys.insert(k);
  std::vector<Row> out;
  for (const auto& [t, r] : keys) {
    Row row{t, r};
    if (const TenantQuota* q = config_.of(t)) {
      auto it = q->find(r);
      row.quota_nodes = it == q->end() ? 0 : it->second.nodes.value_or(-1);
      row.quota_gpus = it == q->end() ? 0 : it->second.gpus.value_or(-1);
    }
    row.used_nodes = used_nodes(t, r);
    row.used_gpus = row.used_nodes * gpus_per_node(r);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace controller
