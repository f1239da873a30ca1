// Tenant quotas, in Kueue's terms: each tenant has a nominal quota of nodes
// and GPUs per region (a ClusterQueue's nominalQuota per flavor, with a
// region as the flavor). The scheduler admits a job to placement only where
// its tenant's usage plus the job stays within that quota; a job with no
// such region waits in PENDING with a "QuotaExceeded" reason.
//
// Configuration (--quotas FILE, GREENSHARD_QUOTAS_FILE; the chart's
// `quotas:` value), parsed by controller/config/config_files.h:
//
//   default:                 # tenants not listed below (omitted: unlimited)
//     DE: {nodes: 1}
//   tenants:
//     team-a:
//       DE: {nodes: 4, gpus: 32}
//       FR: {nodes: 2}       # gpus omitted: not limited
//
// A region not listed for a tenant (or in `default`) is a quota of 0 there.
// Usage counts what a tenant's jobs hold or have reserved: a live gang's
// nodes in its region, and a placed job's planned windows (the most nodes
// of any of its windows in that region). GPUs are nodes x the region's
// gpus_per_node.
#pragma once

#include <climits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/core/region_config.h"

namespace controller {

struct RegionQuota {
  std::optional<int> nodes;  // nullopt: not limited
  std::optional<int> gpus;
  bool operator==(const RegionQuota&) const = default;
};

using TenantQuota = std::map<std::string, RegionQuota>;  // region -> quota

struct QuotaConfig {
  std::string origin;  // the file, for messages
  std::map<std::string, TenantQuota> tenants;
  std::optional<TenantQuota> default_quota;

  // No quota at all (no file, or an empty one): every tenant is unlimited.
  bool empty() const { return tenants.empty() && !default_quota; }
  // The tenant's quota, nullptr when the tenant is not limited.
  const TenantQuota* of(const std::string& tenant) const;
};

// What each tenant uses per region, against its quota.
class QuotaLedger {
 public:
  QuotaLedger(const QuotaConfig& config, const std::vector<RegionConfig>& regions);

  void add(const std::string& tenant, const std::string& region, int nodes);
  // Takes back `nodes` that add() counted (never below 0): a placed job
  // whose reservation a re-plan released.
  void release(const std::string& tenant, const std::string& region, int nodes);
  int used_nodes(const std::string& tenant, const std::string& region) const;
  // Nodes the tenant may still take in the region: INT_MAX when unlimited,
  // 0 when the region is not in its quota, never negative.
  int room(const std::string& tenant, const std::string& region) const;
  // "team-a uses 3 of 4 nodes in DE" (or "... has no quota in DE"), for a
  // job that needs `nodes` more.
  std::string explain(const std::string& tenant, const std::string& region, int nodes) const;

  // Every (tenant, region) with a quota or a use, for the metrics:
  // quota nodes/gpus (-1 = not limited) and use.
  struct Row {
    std::string tenant, region;
    int quota_nodes = -1, quota_gpus = -1, used_nodes = 0, used_gpus = 0;
  };
  std::vector<Row> rows() const;

 private:
  int gpus_per_node(const std::string& region) const;
  const QuotaConfig& config_;
  std::map<std::string, int> gpus_per_node_;
  std::map<std::pair<std::string, std::string>, int> used_;  // (tenant, region) -> nodes
};

}  // namespace controller
