// Pure JobSpec -> Kubernetes objects, and the worker defaults file (see
// executor_k8s.h).
#include <algorithm>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "controller/executors/k8s_manifest.h"
#include "controller/core/yaml_json.h"
#include "worker/spec/job_spec.h"  // the Kubernetes launch variables
#include "worker/spec/shard_vocabulary.h"  // the torchrun variables

namespace controller {

using json = nlohmann::json;

namespace {

struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void bad(const std::string& path, const std::string& msg) { throw Bad(path + ": " + msg); }

const json& want_object(const json& v, const std::string& path) {
  if (!v.is_object()) bad(path, "expected a map");
  return v;
}
const json& want_array(const json& v, const std::string& path) {
  if (!v.is_array()) bad(path, "expected a list");
  return v;
}
std::string want_string(const json& v, const std::string& path) {
  if (!v.is_string()) bad(path, "expected a string");
  return v.get<std::string>();
}
bool want_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) bad(path, "expected true or false");
  return v.get<bool>();
}
int64_t want_int(const json& v, const std::string& path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad(path, "expected an integer");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad(path, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}
std::string want_enum(const json& v, const std::string& path, std::initializer_list<const char*> allowed) {
  std::string s = want_string(v, path), list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  bad(path, "'" + s + "' is not one of " + list);
}
void only_keys(const json& o, const std::string& path, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : o.items())
    if (!allowed.count(k)) bad(path + "." + k, "unknown key");
}
bool dns_label(const std::string& s) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return s.size() <= 63 && std::regex_match(s, re);
}
bool dns_subdomain(const std::string& s) {
  static const std::regex re("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return s.size() <= 253 && std::regex_match(s, re);
}
// A Kubernetes quantity ("8", "64Gi", "500m", "1.5"), as a string.
std::string want_quantity(const json& v, const std::string& path) {
  static const std::regex re("[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?");
  std::string s;
  if (v.is_number_integer()) s = std::to_string(v.get<int64_t>());
  else if (v.is_number()) s = v.dump();
  else if (v.is_string()) s = v.get<std::string>();
  else bad(path, "expected a quantity");
  if (!std::regex_match(s, re)) bad(path, "'" + s + "' is not a quantity");
  return s;
}

json seccomp(const json& v, const std::string& path) {
  only_keys(want_object(v, path), path, {"type", "localhostProfile"});
  if (!v.contains("type")) bad(path + ".type", "required");
  want_enum(v["type"], path + ".type", {"RuntimeDefault", "Localhost", "Unconfined"});
  if (v.contains("localhostProfile")) want_string(v["localhostProfile"], path + ".localhostProfile");
  return v;
}

json pod_security_context(const json& v, const std::string& path) {
  only_keys(want_object(v, path), path,
            {"runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "fsGroupChangePolicy", "supplementalGroups",
             "seccompProfile", "seLinuxOptions", "sysctls", "appArmorProfile"});
  for (const char* k : {"runAsUser", "runAsGroup", "fsGroup"})
    if (v.contains(k)) want_int(v[k], path + "." + k, 0, INT32_MAX);
  if (v.contains("runAsNonRoot")) want_bool(v["runAsNonRoot"], path + ".runAsNonRoot");
  if (v.contains("fsGroupChangePolicy"))
    want_enum(v["fsGroupChangePolicy"], path + ".fsGroupChangePolicy", {"Always", "OnRootMismatch"});
  if (v.contains("supplementalGroups")) {
    const auto& a = want_array(v["supplementalGroups"], path + ".supplementalGroups");
    for (size_t i = 0; i < a.size(); ++i)
      want_int(a[i], path + ".supplementalGroups[" + std::to_string(i) + "]", 0, INT32_MAX);
  }
  if (v.contains("seccompProfile")) seccomp(v["seccompProfile"], path + ".seccompProfile");
  for (const char* k : {"seLinuxOptions", "appArmorProfile"})
    if (v.contains(k)) want_object(v[k], path + "." + k);
  if (v.contains("sysctls")) want_array(v["sysctls"], path + ".sysctls");
  return v;
}

json container_security_context(const json& v, const std::string& path) {
  only_keys(want_object(v, path), path,
            {"runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation",
             "privileged", "capabilities", "seccompProfile", "seLinuxOptions", "procMount", "appArmorProfile"});
  for (const char* k : {"runAsUser", "runAsGroup"})
    if (v.contains(k)) want_int(v[k], path + "." + k, 0, INT32_MAX);
  for (const char* k : {"runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "privileged"})
    if (v.contains(k)) want_bool(v[k], path + "." + k);
  if (v.contains("capabilities")) {
    const std::string cp = path + ".capabilities";
    only_keys(want_object(v["capabilities"], cp), cp, {"add", "drop"});
    for (const char* k : {"add", "drop"})
      if (v["capabilities"].contains(k)) {
        const auto& a = want_array(v["capabilities"][k], cp + "." + k);
        for (size_t i = 0; i < a.size(); ++i) want_string(a[i], cp + "." + k + "[" + std::to_string(i) + "]");
      }
  }
  if (v.contains("seccompProfile")) seccomp(v["seccompProfile"], path + ".seccompProfile");
  if (v.contains("procMount")) want_enum(v["procMount"], path + ".procMount", {"Default", "Unmasked"});
  for (const char* k : {"seLinuxOptions", "appArmorProfile"})
    if (v.contains(k)) want_object(v[k], path + "." + k);
  return v;
}

// Environment variables the controller sets itself.
bool reserved_env(const std::string& n) {
  for (const char* p : {"MASTER_", "PET_", "GREENSHARD_"})
    if (n.rfind(p, 0) == 0) return true;
  for (const char* v : shard::kRankEnvVars)
    if (n == v) return true;
  return n == greenshard::kJobCompletionIndexVar;
}

// The one GREENSHARD_* variable worker defaults may set: the PEM bundle the
// worker verifies an https:// controller with (worker/status.h). Its value
// must be a file under one of the defaults' volumeMounts (the chart mounts
// the CA there).
constexpr const char* kCaBundleEnv = "GREENSHARD_CA_BUNDLE";

constexpr const char* kJobSpecMount = "/etc/greenshard";
constexpr const char* kCheckpointMount = "/checkpoints";
// The region's checkpoint_s3 Secret (a Secret volume may nest in the
// read-only job-spec ConfigMap volume: the kubelet makes its mount point).
constexpr const char* kS3SecretMount = "/etc/greenshard/s3";
constexpr const char* kS3SecretVolume = "s3-credentials";

}  // namespace

WorkerDefaults parse_worker_defaults(const std::string& text, const std::string& origin) {
  json root;
  try {
    root = yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(origin + ": " + e.what());
  }
  WorkerDefaults d;
  if (root.is_null()) return d;  // an empty file
  try {
    if (!root.is_object()) bad("(top level)", "expected a map");
    for (const auto& [k, v] : root.items()) {
      const std::string& p = k;
      if (k == "image") {
        d.image = want_string(v, p);
        if (d.image.empty()) bad(p, "must not be empty");
      } else if (k == "imagePullPolicy") {
        d.image_pull_policy = want_enum(v, p, {"Always", "IfNotPresent", "Never"});
      } else if (k == "imagePullSecrets") {
        for (size_t i = 0; i < want_array(v, p).size(); ++i) {
          const std::string q = p + "[" + std::to_string(i) + "]";
          only_keys(want_object(v[i], q), q, {"name"});
          if (!v[i].contains("name")) bad(q + ".name", "required");
          if (!dns_subdomain(want_string(v[i]["name"], q + ".name")))
            bad(q + ".name", "not a DNS-1123 subdomain");
        }
        d.image_pull_secrets = v;
      } else if (k == "terminationGracePeriodSeconds") {
        d.termination_grace_s = want_int(v, p, 0, 24 * 3600);
      } else if (k == "automountServiceAccountToken") {
        d.automount_service_account_token = want_bool(v, p);
      } else if (k == "resources") {
        only_keys(want_object(v, p), p, {"requests", "limits"});
        for (const char* part : {"requests", "limits"}) {
          if (!v.contains(part)) continue;
          const std::string q = p + "." + part;
          json out = json::object();
          for (const auto& [name, qty] : want_object(v[part], q).items()) {
            if (name.empty()) bad(q, "empty resource name");
            out[name] = want_quantity(qty, q + "." + name);
          }
          d.resources[part] = out;
        }
      } else if (k == "env") {
        std::set<std::string> seen;
        for (size_t i = 0; i < want_array(v, p).size(); ++i) {
          const std::string q = p + "[" + std::to_string(i) + "]";
          const json& e = want_object(v[i], q);
          only_keys(e, q, {"name", "value", "valueFrom"});
          if (!e.contains("name")) bad(q + ".name", "required");
          const std::string n = want_string(e["name"], q + ".name");
          static const std::regex env_re("[-._a-zA-Z][-._a-zA-Z0-9]*");
          if (!std::regex_match(n, env_re)) bad(q + ".name", "'" + n + "' is not a valid variable name");
          if (reserved_env(n) && n != kCaBundleEnv) bad(q + ".name", n + " is set by the controller");
          if (!seen.insert(n).second) bad(q + ".name", n + " is set twice");
          if (e.contains("value") == e.contains("valueFrom")) bad(q, "exactly one of value and valueFrom");
          if (e.contains("value")) want_string(e["value"], q + ".value");
          else want_object(e["valueFrom"], q + ".valueFrom");
        }
        d.env = v;
      } else if (k == "volumes") {
        std::set<std::string> seen;
        for (size_t i = 0; i < want_array(v, p).size(); ++i) {
          const std::string q = p + "[" + std::to_string(i) + "]";
          const json& vol = want_object(v[i], q);
          if (!vol.contains("name")) bad(q + ".name", "required");
          const std::string n = want_string(vol["name"], q + ".name");
          if (!dns_label(n)) bad(q + ".name", "'" + n + "' is not a DNS-1123 label");
          if (n == "job-spec" || n == "checkpoints" || n == kS3SecretVolume)
            bad(q + ".name", n + " is the controller's volume");
          if (!seen.insert(n).second) bad(q + ".name", n + " is defined twice");
          if (vol.size() != 2) bad(q, "exactly one volume source besides name");
          for (const auto& [src, body] : vol.items()) {
            if (src == "name") continue;
            want_object(body, q + "." + src);
            if (src == "emptyDir") {
              only_keys(body, q + ".emptyDir", {"medium", "sizeLimit"});
              if (body.contains("medium")) want_enum(body["medium"], q + ".emptyDir.medium", {"", "Memory"});
              if (body.contains("sizeLimit")) {
                json copy = vol;
                copy["emptyDir"]["sizeLimit"] = want_quantity(body["sizeLimit"], q + ".emptyDir.sizeLimit");
                d.volumes.push_back(copy);
                continue;
              }
            }
            d.volumes.push_back(vol);
          }
        }
      } else if (k == "volumeMounts") {
        d.volume_mounts = want_array(v, p);  // names checked against volumes below
      } else if (k == "podSecurityContext") {
        d.pod_security_context = pod_security_context(v, p);
      } else if (k == "securityContext") {
        d.security_context = container_security_context(v, p);
      } else if (k == "nodeSelector") {
        for (const auto& [nk, nv] : want_object(v, p).items()) want_string(nv, p + "." + nk);
        d.node_selector = v;
      } else if (k == "tolerations") {
        for (size_t i = 0; i < want_array(v, p).size(); ++i) {
          const std::string q = p + "[" + std::to_string(i) + "]";
          const json& t = want_object(v[i], q);
          only_keys(t, q, {"key", "operator", "value", "effect", "tolerationSeconds"});
          if (t.contains("key")) want_string(t["key"], q + ".key");
          if (t.contains("operator")) want_enum(t["operator"], q + ".operator", {"Exists", "Equal"});
          if (t.contains("value")) want_string(t["value"], q + ".value");
          if (t.contains("effect"))
            want_enum(t["effect"], q + ".effect", {"NoSchedule", "PreferNoSchedule", "NoExecute"});
          if (t.contains("tolerationSeconds")) want_int(t["tolerationSeconds"], q + ".tolerationSeconds", 0, INT64_MAX);
          if (t.value("operator", "Equal") == "Exists" && t.contains("value"))
            bad(q + ".value", "must be empty when operator is Exists");
        }
        d.tolerations = v;
      } else if (k == "affinity") {
        only_keys(want_object(v, p), p, {"nodeAffinity", "podAffinity", "podAntiAffinity"});
        for (const auto& [ak, av] : v.items()) want_object(av, p + "." + ak);
        d.affinity = v;
      } else if (k == "priorityClassName") {
        d.priority_class_name = want_string(v, p);
        if (!d.priority_class_name.empty() && !dns_subdomain(d.priority_class_name))
          bad(p, "not a DNS-1123 subdomain");
      } else {
        bad(p, "unknown key");
      }
    }
    std::set<std::string> volumes, paths;
    for (const auto& vol : d.volumes) volumes.insert(vol["name"].get<std::string>());
    for (size_t i = 0; i < d.volume_mounts.size(); ++i) {
      const std::string q = "volumeMounts[" + std::to_string(i) + "]";
      const json& m = want_object(d.volume_mounts[i], q);
      only_keys(m, q, {"name", "mountPath", "readOnly", "subPath"});
      if (!m.contains("name")) bad(q + ".name", "required");
      if (!m.contains("mountPath")) bad(q + ".mountPath", "required");
      const std::string n = want_string(m["name"], q + ".name");
      if (!volumes.count(n)) bad(q + ".name", "no volume named '" + n + "' in volumes");
      const std::string mp = want_string(m["mountPath"], q + ".mountPath");
      if (mp.empty() || mp[0] != '/') bad(q + ".mountPath", "must be an absolute path");
      if (mp == kJobSpecMount || mp == kCheckpointMount || mp == kS3SecretMount)
        bad(q + ".mountPath", mp + " is the controller's mount");
      if (!paths.insert(mp).second) bad(q + ".mountPath", mp + " is mounted twice");
      if (m.contains("readOnly")) want_bool(m["readOnly"], q + ".readOnly");
      if (m.contains("subPath")) want_string(m["subPath"], q + ".subPath");
    }
    for (size_t i = 0; i < d.env.size(); ++i) {
      if (d.env[i]["name"] != kCaBundleEnv) continue;
      const std::string q = "env[" + std::to_string(i) + "]";
      if (!d.env[i].contains("value")) bad(q + ".value", std::string(kCaBundleEnv) + " needs a value (a path)");
      const std::string v = d.env[i]["value"].get<std::string>();
      bool mounted = false;
      for (const std::string& mp : paths) {
        const std::string dir = mp.back() == '/' ? mp : mp + "/";
        if (v.size() > dir.size() && v.rfind(dir, 0) == 0) mounted = true;
      }
      if (!mounted)
        bad(q + ".value", std::string(kCaBundleEnv) + " '" + v +
                              "' is not a file under one of volumeMounts' mountPath (mount the CA bundle there)");
    }
  } catch (const Bad& e) {
    throw std::runtime_error(origin + ": " + e.what());
  }
  return d;
}

WorkerDefaults load_worker_defaults_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("worker defaults '" + path + "': cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_worker_defaults(ss.str(), path);
}

WorkerDefaults worker_defaults_from_env() {
  const char* p = std::getenv("GREENSHARD_WORKER_DEFAULTS_FILE");
  if (!p || !*p) return {};
  try {
    return load_worker_defaults_file(p);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("GREENSHARD_WORKER_DEFAULTS_FILE: ") + e.what());
  }
}

std::string kube_name(const std::string& job_id, int attempt) {
  return "gs-" + job_id + "-" + std::to_string(attempt);
}

KubeObjects render_kube_objects(const GangSpec& g, const KubeClusterConfig& c,
                                std::chrono::milliseconds grace, const std::string& uid,
                                const WorkerDefaults& d) {
  KubeObjects o;
  o.name = kube_name(g.job_id, g.attempt);
  const std::string& ns = c.namespace_;
  const int nodes = g.width(), ppn = g.spec.procs_per_node;
  const std::string port = std::to_string(c.rendezvous_port);
  const std::string master = o.name + "-0." + o.name;  // <job>-<index>.<subdomain>
  json labels = {{"app.kubernetes.io/name", "greenshard-worker"},
                 {"app.kubernetes.io/instance", o.name},
                 {"app.kubernetes.io/component", "worker"},
                 {"app.kubernetes.io/part-of", "greenshard"},
                 {"app.kubernetes.io/managed-by", "greenshard-controller"},
                 {"greenshard.io/job-id", g.job_id}};
  json job_labels = labels;
  if (!c.queue_name.empty()) job_labels["kueue.x-k8s.io/queue-name"] = c.queue_name;
  json owner = json::array();
  if (!uid.empty())
    owner.push_back({{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", o.name}, {"uid", uid},
                     {"controller", true}, {"blockOwnerDeletion", true}});

  auto index_ref = json{{"fieldRef", {{"fieldPath",
                                       "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}};
  json env = json::array();
  auto add = [&](const std::string& k, const std::string& v) { env.push_back({{"name", k}, {"value", v}}); };
  // The pod's launch variables (worker/spec/job_spec.h: resolve_launch
  // reads them); its process starts the node's ranks with the torchrun ones.
  add(shard::kMasterAddrVar, master);
  add(shard::kMasterPortVar, port);
  add(shard::kWorldSizeVar, std::to_string(nodes * ppn));
  if (ppn == 1) env.push_back({{"name", shard::kRankVar}, {"valueFrom", index_ref}});
  add(greenshard::kPetNnodesVar, std::to_string(nodes));
  add(greenshard::kPetNprocPerNodeVar, std::to_string(ppn));
  env.push_back({{"name", greenshard::kPetNodeRankVar}, {"valueFrom", index_ref}});
  env.push_back({{"name", greenshard::kJobCompletionIndexVar}, {"valueFrom", index_ref}});
  add(greenshard::kPetMasterAddrVar, master);
  add(greenshard::kPetMasterPortVar, port);
  add("GREENSHARD_JOB_ID", g.job_id);
  const S3CheckpointConfig& s3 = c.checkpoint_s3;
  if (s3.enabled()) {
    // Checkpoints in the bucket; the local "checkpoints" emptyDir keeps only
    // the summary file (the executor reads the termination message, not this
    // file). The worker creates no directory for the summary: it goes in the
    // mount itself.
    add("GREENSHARD_CHECKPOINT_DIR", s3.url + "/" + g.job_id);
    add("GREENSHARD_SUMMARY_PATH", std::string(kCheckpointMount) + "/summary.json");
    add("AWS_ENDPOINT_URL_S3", s3.endpoint);
    if (!s3.region.empty()) add("AWS_REGION", s3.region);
    add("GREENSHARD_S3_SECRET_DIR", kS3SecretMount);  // credentials as files, never as env values
  } else {
    add("GREENSHARD_CHECKPOINT_DIR", std::string(kCheckpointMount) + "/" + g.job_id);
    add("GREENSHARD_SUMMARY_PATH", std::string(kCheckpointMount) + "/" + g.job_id + "/summary.json");
  }
  add("GREENSHARD_TERMINATION_LOG", "/dev/termination-log");  // the executor reads how the gang ended
  add("GREENSHARD_METRICS_PORT", "9400");
  add("GREENSHARD_REGION", g.region);
  add("GREENSHARD_GRID_INTENSITY", std::to_string(g.intensity));
  add("GREENSHARD_PUE", std::to_string(g.pue));
  add("GREENSHARD_STATUS_URL", g.status_url);
  add("GREENSHARD_STATUS_TOKEN", g.status_token);
  if (!g.intensity_url.empty()) add("GREENSHARD_INTENSITY_URL", g.intensity_url);
  // A GPU job trains on its GPUs or fails (a CPU-only image, a missing
  // device plugin): it never falls back to the CPU silently. The chart's
  // worker env may still choose.
  const bool env_sets_device = std::any_of(d.env.begin(), d.env.end(), [](const json& e) {
    return e.is_object() && e.value("name", "") == "GREENSHARD_DEVICE";
  });
  if (!env_sets_device) add("GREENSHARD_DEVICE", g.spec.gpus_per_node > 0 ? "cuda" : "cpu");
  for (const auto& e : d.env) {
    // The region's S3 settings (AWS_ENDPOINT_URL_S3, AWS_REGION) win over
    // the defaults' variables of the same name; other names the controller
    // sets are refused by parse_worker_defaults.
    const std::string n = e.is_object() ? e.value("name", "") : "";
    if (std::any_of(env.begin(), env.end(), [&](const json& x) { return x.value("name", "") == n; })) continue;
    env.push_back(e);
  }

  json mounts = {{{"name", "job-spec"}, {"mountPath", kJobSpecMount}, {"readOnly", true}},
                 {{"name", "checkpoints"}, {"mountPath", kCheckpointMount}}};
  if (s3.enabled()) mounts.push_back({{"name", kS3SecretVolume}, {"mountPath", kS3SecretMount}, {"readOnly", true}});
  for (const auto& m : d.volume_mounts) mounts.push_back(m);
  const std::string image = !g.spec.image.empty() ? g.spec.image : !c.image.empty() ? c.image : d.image;
  json container = {
      {"name", "worker"},
      {"image", image},
      {"command", {"greenshard-worker", "--config", "/etc/greenshard/job.json"}},
      {"env", env},
      {"ports", {{{"name", "rendezvous"}, {"containerPort", c.rendezvous_port}, {"protocol", "TCP"}},
                 {{"name", "metrics"}, {"containerPort", 9400}, {"protocol", "TCP"}}}},
      {"volumeMounts", mounts},
      // A failed container's termination message is its log tail (the
      // executor quotes its last line); a worker that exits 0 may write its
      // summary JSON to /dev/termination-log for the executor to read.
      {"terminationMessagePolicy", "FallbackToLogsOnError"}};
  if (!d.image_pull_policy.empty()) container["imagePullPolicy"] = d.image_pull_policy;
  // The defaults' resources, with nvidia.com/gpu from the job (and none for a
  // CPU-only job).
  json resources = d.resources;
  for (const char* part : {"requests", "limits"}) {
    json q = resources.value(part, json::object());
    if (g.spec.gpus_per_node > 0) q["nvidia.com/gpu"] = std::to_string(g.spec.gpus_per_node);
    else q.erase("nvidia.com/gpu");
    if (q.empty()) resources.erase(part);
    else resources[part] = q;
  }
  if (!resources.empty()) container["resources"] = resources;
  if (!d.security_context.empty()) container["securityContext"] = d.security_context;
  // A PVC when the region names one; else an emptyDir (with checkpoint_s3 it
  // holds only the summary).
  json ckpt_volume = c.checkpoint_claim.empty() || s3.enabled()
                         ? json{{"name", "checkpoints"}, {"emptyDir", json::object()}}
                         : json{{"name", "checkpoints"},
                                {"persistentVolumeClaim", {{"claimName", c.checkpoint_claim}}}};
  const int64_t grace_s = d.termination_grace_s ? *d.termination_grace_s
                                                : std::max<int64_t>(1, grace.count() / 1000);
  json volumes = {{{"name", "job-spec"}, {"configMap", {{"name", o.name}}}}, ckpt_volume};
  if (s3.enabled()) volumes.push_back({{"name", kS3SecretVolume}, {"secret", {{"secretName", s3.secret}}}});
  for (const auto& v : d.volumes) volumes.push_back(v);
  json pod_spec = {{"subdomain", o.name},
                   {"restartPolicy", "Never"},
                   {"terminationGracePeriodSeconds", grace_s},
                   {"containers", {container}},
                   {"volumes", volumes}};
  if (!d.image_pull_secrets.empty()) pod_spec["imagePullSecrets"] = d.image_pull_secrets;
  if (d.automount_service_account_token)
    pod_spec["automountServiceAccountToken"] = *d.automount_service_account_token;
  if (!d.pod_security_context.empty()) pod_spec["securityContext"] = d.pod_security_context;
  if (!d.node_selector.empty()) pod_spec["nodeSelector"] = d.node_selector;
  if (!d.tolerations.empty()) pod_spec["tolerations"] = d.tolerations;
  if (!d.affinity.empty()) pod_spec["affinity"] = d.affinity;
  if (!d.priority_class_name.empty()) pod_spec["priorityClassName"] = d.priority_class_name;

  o.job = {{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"metadata", {{"name", o.name}, {"namespace", ns}, {"labels", job_labels},
                         {"annotations", {{"greenshard.io/attempt", std::to_string(g.attempt)},
                                          {"greenshard.io/region", g.region}}}}},
           {"spec",
            {{"completionMode", "Indexed"},
             {"completions", nodes},
             {"parallelism", nodes},
             {"backoffLimit", 0},
             {"suspend", !c.queue_name.empty()},
             {"template",
              {{"metadata", {{"labels", labels}}}, {"spec", pod_spec}}}}}};
  json meta = {{"name", o.name}, {"namespace", ns}, {"labels", labels}};
  if (!owner.empty()) meta["ownerReferences"] = owner;
  o.service = {{"apiVersion", "v1"},
               {"kind", "Service"},
               {"metadata", meta},
               {"spec", {{"clusterIP", "None"},
                         {"publishNotReadyAddresses", true},
                         {"selector", {{"greenshard.io/job-id", g.job_id},
                                       {"app.kubernetes.io/instance", o.name}}},
                         {"ports", {{{"name", "rendezvous"}, {"port", c.rendezvous_port},
                                     {"targetPort", c.rendezvous_port}, {"protocol", "TCP"}}}}}}};
  o.config_map = {{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata", meta},
                  {"data", {{"job.json", g.spec.worker.dump(2)}}}};
  return o;
}

}  // namespace controller
