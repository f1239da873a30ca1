// Parsers of the carbon source and hardware files (config_files.h). The
// carbon/-backed parts are in intensity_sources.cpp.
#include "controller/config/config_files.h"
#include "controller/config/intensity_sources.h"
#include "controller/core/yaml_json.h"

#include "carbon/http_client.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace controller {

namespace {

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string read_or_throw(const std::string& path, const std::string& what) {
  std::string text;
  if (!read_file(path, &text)) throw std::runtime_error(what + " '" + path + "': cannot read");
  return text;
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

YAML::Node load_map(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(origin + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) throw std::runtime_error(origin + ": expected a map at the top level");
  return root;
}

std::string scalar(const YAML::Node& v, const std::string& where) {
  return yaml_scalar<std::string>(v, where, "expected a string");
}

int integer(const YAML::Node& v, const std::string& where, int lo, int hi) {
  const long long x = yaml_scalar<long long>(v, where, "expected an integer");
  if (x < lo || x > hi)
    throw std::runtime_error(where + ": must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "], got " + std::to_string(x));
  return int(x);
}

bool boolean(const YAML::Node& v, const std::string& where) {
  return yaml_scalar<bool>(v, where, "expected true or false");
}

}  // namespace

CarbonSourceConfig load_carbon_source_file(const std::string& path) {
  return parse_carbon_source_yaml(read_or_throw(path, "carbon source file"), path);
}

CarbonSourceConfig parse_carbon_source_yaml(const std::string& text, const std::string& origin) {
  YAML::Node root = load_map(text, origin);
  CarbonSourceConfig c;
  c.origin = origin;
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string k = scalar(kv.first, origin + ": a key");
    const std::string w = origin + ": " + k;
    const YAML::Node& v = kv.second;
    seen.insert(k);
    if (k == "source") c.source = scalar(v, w);
    else if (k == "refresh_seconds") c.refresh_seconds = integer(v, w, 10, 86400);
    else if (k == "forecast_horizon_hours") c.forecast_horizon_hours = integer(v, w, 1, 168);
    else if (k == "max_stale_seconds") c.max_stale_seconds = integer(v, w, 0, 7 * 86400);
    else if (k == "data_dir") c.data_dir = scalar(v, w);
    else if (k == "forecaster") c.forecaster = scalar(v, w);
    else if (k == "replay") c.replay = boolean(v, w);
    else if (k == "url") c.url = scalar(v, w);
    else if (k == "api_key_file") c.api_key_file = scalar(v, w);
    else throw std::runtime_error(origin + ": unknown key '" + k + "'");
  }
  if (!seen.count("source")) throw std::runtime_error(origin + ": source: required (file, carbon-aware-sdk or electricitymaps)");
  const bool live = c.source == "carbon-aware-sdk" || c.source == "electricitymaps";
  if (c.source != "file" && !live)
    throw std::runtime_error(origin + ": source: must be file, carbon-aware-sdk or electricitymaps, got '" +
                             c.source + "'");
  auto not_for = [&](const char* key) {
    if (seen.count(key))
      throw std::runtime_error(origin + ": " + key + ": not used by source " + c.source);
  };
  if (c.source == "file") {
    not_for("url");
    not_for("api_key_file");
    if (!c.data_dir.empty() && c.data_dir.front() != '/')
      throw std::runtime_error(origin + ": data_dir: must be an absolute path or empty, got '" + c.data_dir + "'");
    if (const std::string e = forecaster_spec_error(c.forecaster); !e.empty())
      throw std::runtime_error(origin + ": forecaster: " + e);
    if (c.forecaster.rfind("perfect", 0) == 0 && !c.replay)
      throw std::runtime_error(origin + ": forecaster: '" + c.forecaster +
                               "' uses the recorded future, which a running service does not have; "
                               "allowed only with replay: true (a simulation replay)");
    return c;
  }
  not_for("data_dir");
  not_for("forecaster");  // live sources: the source's own forecast
  not_for("replay");
  if (c.url.empty()) throw std::runtime_error(origin + ": url: required for source " + c.source);
  const bool space = std::any_of(c.url.begin(), c.url.end(), [](unsigned char ch) { return std::isspace(ch); });
  try {
    if (space) throw std::invalid_argument("has white space");
    carbon::split_http_url(c.url);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(origin + ": url: must be http(s)://host[:port][/path], got '" + c.url + "': " + e.what());
  }
  if (c.source == "electricitymaps" && c.api_key_file.empty())
    throw std::runtime_error(origin + ": api_key_file: required for source electricitymaps");
  if (!c.api_key_file.empty()) {
    std::string key;
    if (!read_file(c.api_key_file, &key)) {
      // The Carbon Aware SDK needs no key: a key file that is not there is fine.
      if (c.source == "electricitymaps")
        throw std::runtime_error(origin + ": api_key_file: '" + c.api_key_file + "': cannot read");
    } else {
      c.api_key = trim(key);
      if (c.source == "electricitymaps" && c.api_key.empty())
        throw std::runtime_error(origin + ": api_key_file: '" + c.api_key_file + "' is empty");
      if (std::any_of(c.api_key.begin(), c.api_key.end(),
                      [](unsigned char ch) { return ch < 0x21 || ch > 0x7e; }))
        throw std::runtime_error(origin + ": api_key_file: '" + c.api_key_file +
                                 "': the key has whitespace or non-printable characters");
    }
  }
  return c;
}

void load_hardware_file(const std::string& path, std::vector<RegionConfig>& regions) {
  apply_hardware_yaml(read_or_throw(path, "hardware file"), path, regions);
}

void apply_hardware_yaml(const std::string& text, const std::string& origin, std::vector<RegionConfig>& regions) {
  YAML::Node root = load_map(text, origin);
  for (const auto& kv : root)
    if (scalar(kv.first, origin + ": a key") != "regions")
      throw std::runtime_error(origin + ": unknown key '" + kv.first.as<std::string>() + "'");
  const YAML::Node list = root["regions"];
  if (!list || !(list.IsMap() || list.IsNull()))
    throw std::runtime_error(origin + ": regions: required (a map of region name to hardware profile)");
  const std::vector<std::string> known = known_hardware_profiles();
  if (known.empty() && list.size() > 0)
    throw std::runtime_error(origin + ": hardware profiles need carbon/ (this controller is built without it)");
  std::string known_list;
  for (const auto& k : known) known_list += (known_list.empty() ? "" : ", ") + k;
  std::vector<std::pair<RegionConfig*, std::string>> set;
  for (const auto& kv : list) {
    const std::string name = scalar(kv.first, origin + ": regions: a key");
    const std::string w = origin + ": regions." + name;
    const std::string profile = scalar(kv.second, w);
    auto r = std::find_if(regions.begin(), regions.end(), [&](const RegionConfig& c) { return c.name == name; });
    if (r == regions.end()) {
      std::string names;
      for (const auto& c : regions) names += (names.empty() ? "" : ", ") + c.name;
      throw std::runtime_error(w + ": no such region in the regions file (regions: " + names + ")");
    }
    if (std::find(known.begin(), known.end(), profile) == known.end())
      throw std::runtime_error(w + ": unknown hardware profile '" + profile + "' (known: " + known_list + ")");
    set.push_back({&*r, profile});
  }
  for (auto& [r, p] : set) r->hardware = p;  // all or nothing
}

namespace {

TenantQuota parse_tenant_quota(const YAML::Node& node, const std::string& where,
                               const std::vector<RegionConfig>& regions) {
  if (!node.IsMap() && !node.IsNull()) throw std::runtime_error(where + ": expected a map of region to {nodes, gpus}");
  TenantQuota q;
  for (const auto& kv : node) {
    const std::string region = scalar(kv.first, where + ": a key");
    const std::string w = where + "." + region;
    if (std::none_of(regions.begin(), regions.end(), [&](const RegionConfig& r) { return r.name == region; })) {
      std::string names;
      for (const auto& c : regions) names += (names.empty() ? "" : ", ") + c.name;
      throw std::runtime_error(w + ": no such region in the regions file (regions: " + names + ")");
    }
    if (!kv.second.IsMap()) throw std::runtime_error(w + ": expected a map with nodes and/or gpus");
    RegionQuota rq;
    for (const auto& f : kv.second) {
      const std::string key = scalar(f.first, w + ": a key");
      if (key == "nodes") rq.nodes = integer(f.second, w + ".nodes", 0, 1000000);
      else if (key == "gpus") rq.gpus = integer(f.second, w + ".gpus", 0, 1000000);
      else throw std::runtime_error(w + ": unknown key '" + key + "' (known: nodes, gpus)");
    }
    q[region] = rq;
  }
  return q;
}

bool valid_tenant(const std::string& t) {
  if (t.empty() || t.size() > 63) return false;
  return std::all_of(t.begin(), t.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

}  // namespace

QuotaConfig load_quota_file(const std::string& path, const std::vector<RegionConfig>& regions) {
  return parse_quota_yaml(read_or_throw(path, "quotas file"), path, regions);
}

QuotaConfig parse_quota_yaml(const std::string& text, const std::string& origin,
                             const std::vector<RegionConfig>& regions) {
  QuotaConfig c;
  c.origin = origin;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(origin + ": not YAML: " + e.what());
  }
  if (root.IsNull()) return c;  // an empty file: no quotas
  if (!root.IsMap()) throw std::runtime_error(origin + ": expected a map at the top level");
  for (const auto& kv : root) {
    const std::string key = scalar(kv.first, origin + ": a key");
    if (key == "default") {
      c.default_quota = parse_tenant_quota(kv.second, origin + ": default", regions);
    } else if (key == "tenants") {
      if (!kv.second.IsMap() && !kv.second.IsNull())
        throw std::runtime_error(origin + ": tenants: expected a map of tenant to its quotas");
      for (const auto& t : kv.second) {
        const std::string tenant = scalar(t.first, origin + ": tenants: a key");
        if (!valid_tenant(tenant))
          throw std::runtime_error(origin + ": tenants." + tenant + ": a tenant is 1..63 of [a-z0-9-]");
        c.tenants[tenant] = parse_tenant_quota(t.second, origin + ": tenants." + tenant, regions);
      }
    } else {
      throw std::runtime_error(origin + ": unknown key '" + key + "' (known: default, tenants)");
    }
  }
  return c;
}

}  // namespace controller
