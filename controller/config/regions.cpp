#include "controller/config/regions.h"
#include "controller/executors/executor_k8s.h"
#include "controller/core/yaml_json.h"
#include "worker/spec/shard_vocabulary.h"

#include <carbon/time_ms.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace controller {

namespace {

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(what + " '" + path + "': cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim_nl(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

template <class T>
T as(const YAML::Node& n, const std::string& where) {
  return yaml_scalar<T>(n, where, "wrong type");
}

void drop_trailing_slashes(std::string& s, size_t keep) {
  while (s.size() > keep && s.back() == '/') s.pop_back();
}

}  // namespace

void validate_s3_checkpoint(S3CheckpointConfig& s3, const std::string& w) {
  auto fail = [&](const std::string& field, const std::string& msg) {
    throw std::runtime_error(w + "." + field + ": " + msg);
  };
  if (s3.url.empty()) fail("url", "required (s3://bucket[/prefix])");
  if (s3.secret.empty())
    fail("secret", "required with url (a Secret with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
  if (s3.endpoint.empty())
    fail("endpoint", "required with url (http(s)://host[:port] of the S3 API, e.g. https://s3.us-east-1.amazonaws.com)");

  // url and endpoint: the rules the worker's S3 client applies
  // (shard/object_store_url.h), checked here when the config loads.
  if (auto why = shard::object_store_url_problem(s3.url); !why.empty()) fail("url", why);
  drop_trailing_slashes(s3.url, 5);
  if (auto why = shard::object_store_endpoint_problem(s3.endpoint, &s3.endpoint); !why.empty()) fail("endpoint", why);
  if (!s3.region.empty()) {
    static const std::regex region_re("[A-Za-z0-9_-]{1,64}");
    if (!std::regex_match(s3.region, region_re))
      fail("region", "'" + s3.region + "' must be 1-64 letters, digits, '-' or '_' (e.g. us-east-1)");
  }
  // secret: a Secret's name, a DNS-1123 subdomain.
  static const std::regex subdomain("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  if (s3.secret.size() > 253 || !std::regex_match(s3.secret, subdomain))
    fail("secret", "'" + s3.secret + "' is not a DNS-1123 subdomain (a Secret name)");
}

std::vector<RegionConfig> default_regions() {
  RegionConfig r;
  r.name = "local";
  return {r};
}

std::vector<RegionConfig> load_regions_file(const std::string& path, const RegionsFileOptions& options) {
  return parse_regions_yaml(read_text(path, "regions file"), path, options);
}

std::vector<RegionConfig> parse_regions_yaml(const std::string& text, const std::string& origin,
                                             const RegionsFileOptions& options) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(origin + ": not YAML: " + e.what());
  }
  if (!root.IsMap() || !root["regions"] || !root["regions"].IsSequence())
    throw std::runtime_error(origin + ": regions: required (a list)");
  for (const auto& kv : root)
    if (as<std::string>(kv.first, origin + ": a key") != "regions")
      throw std::runtime_error(origin + ": unknown key '" + kv.first.as<std::string>() + "'");
  std::vector<RegionConfig> out;
  std::set<std::string> names;
  int i = 0;
  for (const auto& n : root["regions"]) {
    std::string w = origin + ": regions[" + std::to_string(i++) + "]";
    if (!n.IsMap()) throw std::runtime_error(w + ": expected a map");
    RegionConfig r;
    for (const auto& kv : n) {
      std::string k = as<std::string>(kv.first, w + ": a key");
      std::string wk = w + "." + k;
      const YAML::Node& v = kv.second;
      if (k == "name") r.name = as<std::string>(v, wk);
      else if (k == "pue") r.pue = as<double>(v, wk);
      else if (k == "nodes") r.nodes = as<int>(v, wk);
      else if (k == "gpus_per_node") r.gpus_per_node = as<int>(v, wk);
      else if (k == "executor") r.executor = as<std::string>(v, wk);
      else if (k == "intensity") r.intensity = as<double>(v, wk);
      else if (k == "zone") r.zone = as<std::string>(v, wk);
      else if (k == "hourly") {
        if (!v.IsSequence() || v.size() != 24) throw std::runtime_error(wk + ": expected 24 numbers");
        for (const auto& x : v) r.hourly.push_back(as<double>(x, wk));
      } else if (k == "kubernetes") {
        if (!v.IsMap()) throw std::runtime_error(wk + ": expected a map");
        // The connection (kubeconfig or in_cluster) first, wherever it is
        // written; the block's other keys then apply over it.
        if (v["kubeconfig"] && v["in_cluster"])
          throw std::runtime_error(wk + ": set kubeconfig or in_cluster, not both");
        if (v["kubeconfig"]) r.kube = load_kubeconfig(as<std::string>(v["kubeconfig"], wk + ".kubeconfig"));
        if (v["in_cluster"] && as<bool>(v["in_cluster"], wk + ".in_cluster"))
          r.kube = in_cluster_config(options.service_account_dir);
        for (const auto& kk : v) {
          std::string k2 = as<std::string>(kk.first, wk + ": a key");
          std::string wk2 = wk + "." + k2;
          if (k2 == "kubeconfig" || k2 == "in_cluster") continue;  // read above
          else if (k2 == "server") r.kube.server = as<std::string>(kk.second, wk2);
          else if (k2 == "ca_file") r.kube.ca_file = as<std::string>(kk.second, wk2);
          else if (k2 == "token_file") r.kube.token_file = as<std::string>(kk.second, wk2);
          else if (k2 == "namespace") r.kube.namespace_ = as<std::string>(kk.second, wk2);
          else if (k2 == "image") r.kube.image = as<std::string>(kk.second, wk2);
          else if (k2 == "checkpoint_claim") r.kube.checkpoint_claim = as<std::string>(kk.second, wk2);
          else if (k2 == "checkpoint_s3") {
            if (!kk.second.IsMap()) throw std::runtime_error(wk2 + ": expected a map");
            for (const auto& s : kk.second) {
              const std::string k3 = as<std::string>(s.first, wk2 + ": a key"), wk3 = wk2 + "." + k3;
              if (k3 == "url") r.kube.checkpoint_s3.url = as<std::string>(s.second, wk3);
              else if (k3 == "endpoint") r.kube.checkpoint_s3.endpoint = as<std::string>(s.second, wk3);
              else if (k3 == "region") r.kube.checkpoint_s3.region = as<std::string>(s.second, wk3);
              else if (k3 == "secret") r.kube.checkpoint_s3.secret = as<std::string>(s.second, wk3);
              else throw std::runtime_error(origin + ": unknown key '" + wk3.substr(origin.size() + 2) + "'");
            }
            validate_s3_checkpoint(r.kube.checkpoint_s3, wk2);
          }
          else if (k2 == "queue_name") r.kube.queue_name = as<std::string>(kk.second, wk2);
          else if (k2 == "insecure_skip_verify") r.kube.insecure_skip_verify = as<bool>(kk.second, wk2);
          else throw std::runtime_error(origin + ": unknown key '" + wk2.substr(origin.size() + 2) + "'");
        }
        if (!r.kube.checkpoint_claim.empty() && r.kube.checkpoint_s3.enabled())
          throw std::runtime_error(wk + ".checkpoint_s3: set checkpoint_claim or checkpoint_s3, not both");
      } else {
        throw std::runtime_error(origin + ": unknown key '" + wk.substr(origin.size() + 2) + "'");
      }
    }
    if (r.name.empty()) throw std::runtime_error(w + ".name: required");
    for (char c : r.name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
        throw std::runtime_error(w + ".name: '" + r.name + "' has a character outside [A-Za-z0-9._-]");
    if (!names.insert(r.name).second) throw std::runtime_error(w + ".name: duplicate '" + r.name + "'");
    if (!(r.pue >= 1.0 && r.pue <= 5.0)) throw std::runtime_error(w + ".pue: must be in [1, 5]");
    if (r.nodes < 1) throw std::runtime_error(w + ".nodes: must be >= 1");
    if (r.gpus_per_node < 0) throw std::runtime_error(w + ".gpus_per_node: must be >= 0");
    if (!(r.intensity >= 0 && r.intensity < 5000)) throw std::runtime_error(w + ".intensity: must be in [0, 5000)");
    for (double h : r.hourly)
      if (!(h >= 0 && h < 5000)) throw std::runtime_error(w + ".hourly: values must be in [0, 5000)");
    if (r.executor != "local" && r.executor != "kubernetes")
      throw std::runtime_error(w + ".executor: must be local or kubernetes, got '" + r.executor + "'");
    if (r.executor == "kubernetes") {
      if (r.kube.server.empty()) throw std::runtime_error(w + ".kubernetes.server: required");
      if (r.kube.token.empty() && !r.kube.token_file.empty())
        r.kube.token = trim_nl(read_text(r.kube.token_file, w + ".kubernetes.token_file"));
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) throw std::runtime_error(origin + ": regions: at least one region");
  return out;
}

namespace {
// The `intensity:` / `hourly:` value of a region at t_ms.
double profile_value(const RegionConfig& r, int64_t t_ms) {
  if (r.hourly.empty()) return r.intensity;
  return r.hourly[size_t(carbon::hour_of_day_ms(t_ms))];
}
}  // namespace

std::vector<RegionSnapshot> snapshot_regions(const std::vector<RegionConfig>& regions,
                                             const std::map<std::string, int>& used,
                                             int64_t now_ms, int horizon_h,
                                             const IntensitySource* source) {
  using carbon::kHourMs;
  std::vector<RegionSnapshot> out;
  for (const auto& r : regions) {
    RegionSnapshot s;
    s.name = r.name;
    s.pue = r.pue;
    s.capacity_nodes = r.nodes;
    s.gpus_per_node = r.gpus_per_node;
    s.hardware = r.hardware;
    s.executor = r.executor;
    auto at = [&](int64_t t) { return profile_value(r, t); };
    if (!r.zone.empty() && source) {
      try {
        s.forecast = source->forecast(r.zone, now_ms, horizon_h);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "greenshard-controller: region %s: no intensity: %s\n", r.name.c_str(), e.what());
        s.forecast.clear();
      }
      if (s.forecast.empty()) {
        s.intensity_now = std::numeric_limits<double>::quiet_NaN();
      } else {
        // The value in force (measured or replayed), not the forecaster's
        // estimate of this hour; placement plans with s.forecast.
        s.intensity_now = s.forecast.front().gco2_per_kwh;
        try {
          const double v = source->current(r.zone, now_ms);
          if (std::isfinite(v)) s.intensity_now = v;
        } catch (const std::exception&) {
        }
      }
    } else {
      s.intensity_now = at(now_ms);
      const int64_t h0 = carbon::floor_hour_ms(now_ms);
      for (int h = 0; h <= horizon_h; ++h) s.forecast.push_back({h0 + h * kHourMs, at(h0 + h * kHourMs)});
    }
    out.push_back(std::move(s));
  }
  set_free_nodes(out, used);
  return out;
}

void set_free_nodes(std::vector<RegionSnapshot>& regions, const std::map<std::string, int>& used) {
  for (auto& s : regions) {
    auto it = used.find(s.name);
    s.free_nodes = std::isnan(s.intensity_now) ? 0 : std::max(0, s.capacity_nodes - (it == used.end() ? 0 : it->second));
  }
}

double intensity_in_force(const RegionConfig& r, int64_t now_ms, const IntensitySource* source) {
  if (!r.zone.empty()) {
    if (!source) throw std::runtime_error("region " + r.name + ": no intensity source for zone " + r.zone);
    return source->current(r.zone, now_ms);
  }
  return profile_value(r, now_ms);
}

int64_t forecast_step_ms(const RegionSnapshot& r) {
  using carbon::kMinuteMs;
  for (int64_t step : {60 * kMinuteMs, 30 * kMinuteMs, 15 * kMinuteMs, 5 * kMinuteMs}) {
    bool on_grid = true;
    for (const auto& p : r.forecast) on_grid = on_grid && carbon::floor_mod(p.time_ms, step) == 0;
    if (on_grid) return step;
  }
  return carbon::kHourMs;
}

double forecast_value_at(const RegionSnapshot& r, int64_t t) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (r.forecast.empty() || t < r.forecast.front().time_ms || t >= r.forecast.back().time_ms + forecast_step_ms(r))
    return nan;
  double v = nan;
  for (const auto& p : r.forecast) {
    if (p.time_ms > t) break;
    v = p.gco2_per_kwh;
  }
  return v;
}


// Both delegate to the Kubernetes executor's loaders (executor_k8s.h):
// validated field by field, inline certificate-authority-data supported.
KubeClusterConfig load_kubeconfig(const std::string& path) { return read_kubeconfig_file(path); }

KubeClusterConfig in_cluster_config(const std::string& service_account_dir) {
  return in_cluster_config_at(service_account_dir);
}

std::string shared_checkpoint_location(const RegionConfig& r) {
  if (r.executor == "local") return "local";
  if (r.executor == "sim") return "sim";
  if (r.executor == "kubernetes" && r.kube.checkpoint_s3.enabled())
    return "s3:" + r.kube.checkpoint_s3.endpoint + " " + r.kube.checkpoint_s3.url;
  return "";
}

}  // namespace controller
