// Kubernetes executor: Indexed Job + headless Service + ConfigMap through the
// Kubernetes REST API (see executor_k8s.h).
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "controller/executor_k8s.h"

#include "controller/base64.h"
#include "worker/ca_bundle.h"
#include "worker/config.h"  // kConfigErrorPrefix

namespace controller {

using json = nlohmann::json;

namespace {

struct Gang {
  std::string name, uid;
  int procs_per_node = 1;
  // The controller asked this gang to stop (stop(), or a persisted runtime
  // that says so at adopt()): its end, including the Job's disappearance,
  // is a preemption, not a failure.
  bool stop_requested = false;
  GangPhase last = GangPhase::kStarting;  // reported while the API cannot answer
};

// What the pods of an ended Job tell.
struct PodsVerdict {
  bool config_error = false;  // a worker exited 2
  bool disrupted = false;     // a pod with DisruptionTarget=True (eviction, preemption, drain)
  bool only_killed = true;    // every non-zero exit is 137 or 143 (SIGKILL / SIGTERM)
  json summary;               // the worker's summary, from a termination message
  std::string failure;        // "pod P (index I) exited N: <last line>", first failure
  bool failure_is_config = false;
};

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.find_last_of('\n');
  if (nl != std::string::npos) s = s.substr(nl + 1);
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}



class KubernetesExecutor final : public Executor {
 public:
  KubernetesExecutor(KubeClusterConfig c, std::chrono::milliseconds grace, WorkerDefaults d)
      : c_(std::move(c)), grace_(grace), defaults_(std::move(d)) {}

  std::string kind() const override { return "kubernetes"; }

  GangStatus start(const GangSpec& g) override {
    KubeObjects o = render_kube_objects(g, c_, grace_, "", defaults_);
    const std::string ns = c_.namespace_;
    json created = call("POST", "/apis/batch/v1/namespaces/" + ns + "/jobs", o.job, {201, 200});
    const std::string uid = created.is_object() && created.contains("metadata") && created["metadata"].is_object()
                                ? str(created["metadata"], "uid")
                                : "";
    try {
      if (uid.empty()) throw std::runtime_error("kubernetes: created Job " + o.name + " has no uid");
      KubeObjects owned = render_kube_objects(g, c_, grace_, uid, defaults_);
      call("POST", "/api/v1/namespaces/" + ns + "/services", owned.service, {201, 200});
      call("POST", "/api/v1/namespaces/" + ns + "/configmaps", owned.config_map, {201, 200});
    } catch (...) {
      // A Job without its Service or ConfigMap cannot run: take it down, so
      // the restart (a new attempt) does not race a half-made gang.
      remove(o.name, "Background");
      throw;
    }
    Gang gang;
    gang.name = o.name;
    gang.uid = uid;
    gang.procs_per_node = g.spec.procs_per_node;
    {
      std::lock_guard<std::mutex> l(mu_);
      gangs_[g.job_id] = gang;
    }
    GangStatus st;
    st.phase = GangPhase::kStarting;
    st.runtime = runtime_of(gang);
    return st;
  }

  // The mapping (docs/controller.md, "Kubernetes: how a gang's end is read"):
  //   Job 404, stop requested               -> kPreempted (stopped as asked)
  //   Job 404, not requested                -> kFailed (deleted by someone else)
  //   Complete, stop requested              -> kPreempted
  //   Complete, summary state "preempted"   -> kPreempted
  //   Complete, a pod disrupted (exit 0)    -> kPreempted
  //   Complete otherwise                    -> kSucceeded
  //   Failed, a worker exited 2             -> kConfigError
  //   Failed, stop requested, only exits 137/143 -> kPreempted (killed after the grace)
  //   Failed otherwise                      -> kFailed
  //   suspended (Kueue) or a pod not ready  -> kStarting
  //   every pod ready (or active)           -> kRunning
  //   the API cannot answer                 -> the last phase reported
  GangStatus poll(const std::string& id) override {
    GangStatus st;
    Gang g;
    if (!find(id, &g)) {
      st.phase = GangPhase::kUnknown;
      st.message = "no such gang in this cluster";
      return st;
    }
    st.runtime = runtime_of(g);
    const std::string& name = g.name;
    int code = 0;
    json job = get(job_path(name), &code);
    if (code == 404) {
      forget(id);
      if (g.stop_requested) {
        st.phase = GangPhase::kPreempted;
        st.message = "Job " + name + " was deleted by the controller to stop the gang (stopped as asked)";
      } else {
        st.phase = GangPhase::kFailed;
        st.message = "Job " + name + " disappeared from the cluster (deleted by someone else)";
      }
      return st;
    }
    if (code != 200) {
      st.phase = g.last;
      st.message = "kubernetes API " + (code == 0 ? std::string("unreachable") : "HTTP " + std::to_string(code)) +
                   " reading Job " + name + "; keeping the last phase seen";
      return st;
    }
    const json status = obj(job, "status");
    const json spec = obj(job, "spec");
    std::string ended, ended_why;
    if (status.contains("conditions") && status["conditions"].is_array())
      for (const auto& cond : status["conditions"]) {
        if (!cond.is_object() || str(cond, "status") != "True") continue;
        const std::string type = str(cond, "type");
        if (type == "Complete" || type == "Failed") {
          ended = type;
          ended_why = str(cond, "reason") + (str(cond, "message").empty() ? "" : " " + str(cond, "message"));
          break;
        }
      }
    if (ended == "Complete") {
      PodsVerdict v = inspect_pods(name);
      st.summary = v.summary;
      const std::string state = v.summary.is_object() ? str(v.summary, "state") : "";
      const std::string said = state.empty() ? "" : " (summary: " + state + ")";
      if (g.stop_requested) {
        st.phase = GangPhase::kPreempted;
        st.message = "Job " + name + " ended after the controller asked it to stop (stopped as asked)" + said;
      } else if (state == "preempted") {
        st.phase = GangPhase::kPreempted;
        st.message = "Job " + name + " completed after the worker checkpointed on SIGTERM" + said;
      } else if (v.disrupted) {
        st.phase = GangPhase::kPreempted;
        st.message = "Job " + name + " completed after Kubernetes disrupted a pod (DisruptionTarget)" + said;
      } else {
        st.phase = GangPhase::kSucceeded;
        st.message = "Job " + name + " completed" + said;
      }
      forget(id);
      return st;
    }
    if (ended == "Failed") {
      PodsVerdict v = inspect_pods(name);
      st.message = "Job " + name + " failed: " + ended_why + (v.failure.empty() ? "" : "; " + v.failure);
      if (v.config_error) {
        st.phase = GangPhase::kConfigError;
        st.message += " (a worker exited 2: bad configuration)";
      } else if (g.stop_requested && v.only_killed) {
        st.phase = GangPhase::kPreempted;
        st.message = "Job " + name + " was stopped as asked; ranks were killed after the grace period (" +
                     ended_why + ")";
      } else {
        st.phase = GangPhase::kFailed;
      }
      // The gang restarts as a new Job; remove this one (and, through the
      // owner references, its Service and ConfigMap). A stopped gang's
      // deletion is already under way.
      if (!g.stop_requested) remove(name, "Background");
      forget(id);
      return st;
    }
    if (g.stop_requested && !obj(job, "metadata").contains("deletionTimestamp"))
      remove(name, kStopPropagation);  // the delete of stop() did not get through
    const bool suspended = spec.value("suspend", false) == true;
    const int want = int_of(spec, "parallelism", int_of(spec, "completions", 1));
    const int active = int_of(status, "active", 0), succeeded = int_of(status, "succeeded", 0);
    // status.ready counts pods whose containers run (Ready); clusters that
    // do not report it leave only active (pending or running).
    const int ready = status.contains("ready") ? int_of(status, "ready", 0) : active;
    if (suspended) {
      st.phase = GangPhase::kStarting;
      st.message = "Job " + name + " is suspended (waiting for admission by Kueue)";
    } else if (active > 0 && int64_t{ready} + succeeded >= want) {  // int64: no overflow on any answer
      st.phase = GangPhase::kRunning;
    } else {
      st.phase = GangPhase::kStarting;
      st.message = std::to_string(ready) + " of " + std::to_string(want) + " pods of Job " + name + " ready";
    }
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = gangs_.find(id); it != gangs_.end()) it->second.last = st.phase;
    return st;
  }

  // Deletes the Job with Foreground propagation: the Job stays visible
  // (with a deletionTimestamp) until its pods have ended (each gets SIGTERM
  // and terminationGracePeriodSeconds to checkpoint) and its Service and
  // ConfigMap are gone; its disappearance then means "stopped as asked".
  void stop(const std::string& id, std::chrono::milliseconds) override {
    std::string name;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = gangs_.find(id);
      if (it == gangs_.end()) return;
      it->second.stop_requested = true;
      name = it->second.name;
    }
    remove(name, kStopPropagation);
  }

  void tick() override {}

  bool gone(const std::string& id) override {
    Gang g;
    if (!find(id, &g)) return true;
    int code = 0;
    json job = get(job_path(g.name), &code);
    if (code == 404) {
      forget(id);
      return true;
    }
    if (code == 200 && g.stop_requested && !obj(job, "metadata").contains("deletionTimestamp"))
      remove(g.name, kStopPropagation);  // retry a delete that did not get through
    return false;
  }

  // runtime: what start() and poll() returned ({"executor": "kubernetes",
  // "name", "uid", "namespace", "procs_per_node", "stop_requested"?}); the
  // scheduler's own stop (AdoptOptions::stop_requested: it asked the gang to
  // stop at the end of its window, or for a preemption) counts as a stop
  // request too. A gang whose stop was
  // requested is watched again even when its Job is already gone: the next
  // poll() reports kPreempted (stopped as asked), not a lost gang. When the
  // API server cannot answer, the gang is watched again too (poll() decides
  // later): restarting it now could run it twice.
  bool adopt(const std::string& id, const json& runtime, const AdoptOptions& o) override {
    if (!runtime.is_object() || str(runtime, "executor") != "kubernetes") return false;
    Gang g;
    g.name = str(runtime, "name");
    if (g.name.empty()) return false;
    g.uid = str(runtime, "uid");
    g.procs_per_node = std::max(1, int_of(runtime, "procs_per_node", 1));
    g.stop_requested = runtime.value("stop_requested", json(false)) == true || o.stop_requested;
    int code = 0;
    json job = get(job_path(g.name), &code);
    if (code == 404 && !g.stop_requested) return false;
    if (code == 200) {
      const json meta = obj(job, "metadata");
      if (!g.uid.empty() && str(meta, "uid") != g.uid) return false;  // another Job of that name
      if (g.stop_requested && !meta.contains("deletionTimestamp")) remove(g.name, kStopPropagation);
    }
    std::lock_guard<std::mutex> l(mu_);
    gangs_[id] = g;
    return true;
  }

  std::optional<std::string> logs(const std::string& id, int rank, int64_t offset,
                                  int64_t max_bytes) override {
    Gang g;
    if (!find(id, &g)) return std::nullopt;
    const int ppn = std::max(1, g.procs_per_node);
    int code = 0;
    json pods = get("/api/v1/namespaces/" + c_.namespace_ + "/pods?labelSelector=" +
                        httplib::detail::encode_query_param("job-name=" + g.name +
                                                            ",batch.kubernetes.io/job-completion-index=" +
                                                            std::to_string(rank / ppn)),
                    &code);
    if (code != 200 || !pods.contains("items") || !pods["items"].is_array() || pods["items"].empty())
      return std::nullopt;
    std::string pod = str(obj(pods["items"][0], "metadata"), "name");
    if (pod.empty()) return std::nullopt;
    auto res = client().Get("/api/v1/namespaces/" + c_.namespace_ + "/pods/" + pod + "/log");
    if (!res || res->status != 200) return std::nullopt;
    if (offset >= int64_t(res->body.size())) return std::string();
    return res->body.substr(size_t(offset), size_t(max_bytes));
  }

 private:
  static constexpr const char* kStopPropagation = "Foreground";

  // Tolerant readers of API objects (a field of another type reads as absent).
  static std::string str(const json& o, const char* k) {
    if (!o.is_object()) return "";
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : "";
  }
  static int int_of(const json& o, const char* k, int dflt) {
    if (!o.is_object()) return dflt;
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<int>() : dflt;
  }
  static json obj(const json& o, const char* k) {
    if (!o.is_object()) return json::object();
    auto it = o.find(k);
    return it != o.end() && it->is_object() ? *it : json::object();
  }

  json runtime_of(const Gang& g) const {
    json rt = {{"executor", "kubernetes"}, {"name", g.name}, {"uid", g.uid}, {"namespace", c_.namespace_},
               {"procs_per_node", g.procs_per_node}};
    if (g.stop_requested) rt["stop_requested"] = true;
    return rt;
  }

  std::string job_path(const std::string& name) const {
    return "/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name;
  }

  httplib::Client client() const {
    httplib::Client cli(c_.server);
    if (!c_.token.empty()) cli.set_bearer_token_auth(c_.token);
    if (!c_.ca_file.empty()) cli.set_ca_cert_path(c_.ca_file.c_str());
    cli.enable_server_certificate_verification(!c_.insecure_skip_verify);
    cli.set_connection_timeout(std::chrono::seconds(5));
    cli.set_read_timeout(std::chrono::seconds(30));
    return cli;
  }

  json call(const std::string& method, const std::string& path, const json& body,
            std::initializer_list<int> ok) {
    auto cli = client();
    auto res = method == "POST" ? cli.Post(path, body.dump(), "application/json")
                                : cli.Delete(path, body.dump(), "application/json");
    if (!res) throw std::runtime_error("kubernetes " + method + " " + path + ": " + httplib::to_string(res.error()));
    for (int c : ok)
      if (res->status == c) {
        auto j = json::parse(res->body, nullptr, false);
        return j.is_discarded() ? json::object() : j;
      }
    auto j = json::parse(res->body, nullptr, false);
    std::string msg = j.is_object() ? str(j, "message") : "";
    if (msg.empty()) msg = res->body;
    throw std::runtime_error("kubernetes " + method + " " + path + ": HTTP " + std::to_string(res->status) +
                             ": " + msg);
  }

  json get(const std::string& path, int* code) {
    auto res = client().Get(path);
    if (!res) {
      *code = 0;
      return json::object();
    }
    *code = res->status;
    auto j = json::parse(res->body, nullptr, false);
    return j.is_discarded() || !j.is_object() ? json::object() : j;
  }

  void remove(const std::string& name, const char* propagation) {
    auto cli = client();
    json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", propagation}};
    auto res = cli.Delete(job_path(name), opts.dump(), "application/json");
    (void)res;  // 404: already gone; a stop's delete is retried by poll() and gone()
  }

  // The pods of an ended Job: exit codes, disruptions, and the worker's
  // summary from a termination message (a JSON object with "state", written
  // by a worker that exited 0; with terminationMessagePolicy
  // FallbackToLogsOnError a failed container's message is its log tail).
  PodsVerdict inspect_pods(const std::string& name) {
    PodsVerdict v;
    int code = 0;
    json pods = get("/api/v1/namespaces/" + c_.namespace_ + "/pods?labelSelector=" +
                        httplib::detail::encode_query_param("job-name=" + name),
                    &code);
    if (!pods.contains("items") || !pods["items"].is_array()) return v;
    int summary_index = -1;
    for (const auto& p : pods["items"]) {
      const json meta = obj(p, "metadata"), status = obj(p, "status");
      const std::string pod = str(meta, "name");
      std::string index = str(obj(meta, "annotations"), "batch.kubernetes.io/job-completion-index");
      if (index.empty()) index = str(obj(meta, "labels"), "batch.kubernetes.io/job-completion-index");
      if (status.contains("conditions") && status["conditions"].is_array())
        for (const auto& c : status["conditions"])
          if (str(c, "type") == "DisruptionTarget" && str(c, "status") == "True") v.disrupted = true;
      if (!status.contains("containerStatuses") || !status["containerStatuses"].is_array()) continue;
      for (const auto& cs : status["containerStatuses"]) {
        const json term = obj(obj(cs, "state"), "terminated");
        if (term.empty()) continue;
        const int exit = int_of(term, "exitCode", -1);
        const std::string msg = str(term, "message");
        if (exit == 0) {
          json s = json::parse(msg, nullptr, false);
          const int at = index.empty() ? 1 << 20 : std::atoi(index.c_str());
          if (s.is_object() && s.contains("state") && s["state"].is_string() &&
              (summary_index < 0 || at < summary_index)) {
            v.summary = s;  // rank 0's (the lowest index) when several wrote one
            summary_index = at;
          }
          continue;
        }
        if (exit == 2) v.config_error = true;
        if (exit != 137 && exit != 143) v.only_killed = false;
        if (v.failure.empty() || (exit == 2 && !v.failure_is_config)) {
          v.failure = "pod " + pod + (index.empty() ? "" : " (index " + index + ")") + " exited " +
                      std::to_string(exit);
          v.failure_is_config = exit == 2;
          // Exit 2: the worker's own words (its config error line) when the
          // log tail holds them.
          std::string line = exit == 2 ? greenshard::config_error_in(msg) : "";
          if (line.empty()) line = last_line(msg);
          if (!line.empty()) v.failure += ": " + line;
        }
      }
    }
    return v;
  }

  bool find(const std::string& id, Gang* g) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = gangs_.find(id);
    if (it == gangs_.end()) return false;
    *g = it->second;
    return true;
  }
  void forget(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    gangs_.erase(id);
  }

  KubeClusterConfig c_;
  std::chrono::milliseconds grace_;
  WorkerDefaults defaults_;
  std::mutex mu_;
  std::map<std::string, Gang> gangs_;
};

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(what + ": cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

std::string scalar(const YAML::Node& n, const std::string& path) {
  if (!n || !n.IsScalar()) throw std::runtime_error(path + ": expected a string");
  return n.as<std::string>();
}

// The entry of a kubeconfig list (clusters, contexts, users) with that name.
YAML::Node named(const YAML::Node& root, const std::string& list, const std::string& name,
                 const std::string& inner) {
  const YAML::Node l = root[list];
  if (l && !l.IsSequence()) throw std::runtime_error(list + ": expected a list");
  if (l)
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i].IsMap() && l[i]["name"] && l[i]["name"].IsScalar() && l[i]["name"].as<std::string>() == name) {
        YAML::Node body = l[i][inner];
        if (!body || !body.IsMap())
          throw std::runtime_error(list + "[" + name + "]." + inner + ": expected a map");
        return body;
      }
  throw std::runtime_error(list + "[" + name + "]: no such entry");
}

std::string write_ca(const std::string& pem, std::string dir) {
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = std::string(t && *t ? t : "/tmp") + "/greenshard-kube-ca-" + std::to_string(::getuid());
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
        (st.st_mode & 0022))
      throw std::runtime_error("certificate-authority-data: '" + dir + "' is not a private directory of this user");
  } else {
    std::filesystem::create_directories(dir);
  }
  const std::string path = dir + "/" + sha256_hex(pem) + ".crt";
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << pem;
    if (!out) throw std::runtime_error("certificate-authority-data: cannot write '" + tmp + "'");
  }
  std::filesystem::rename(tmp, path);
  return path;
}

}  // namespace

KubeClusterConfig parse_kubeconfig(const std::string& text, const std::string& origin,
                                   const std::string& ca_dir) {
  try {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw std::runtime_error(e.what());
    }
    if (!root.IsMap()) throw std::runtime_error("(top level): expected a map");
    if (!root["current-context"]) throw std::runtime_error("current-context: required");
    const std::string ctx_name = scalar(root["current-context"], "current-context");
    const YAML::Node ctx = named(root, "contexts", ctx_name, "context");
    const std::string cpath = "contexts[" + ctx_name + "].context";
    if (!ctx["cluster"]) throw std::runtime_error(cpath + ".cluster: required");
    if (!ctx["user"]) throw std::runtime_error(cpath + ".user: required");
    const std::string cluster_name = scalar(ctx["cluster"], cpath + ".cluster");
    const std::string user_name = scalar(ctx["user"], cpath + ".user");
    KubeClusterConfig k;
    if (ctx["namespace"]) k.namespace_ = scalar(ctx["namespace"], cpath + ".namespace");

    const YAML::Node cl = named(root, "clusters", cluster_name, "cluster");
    const std::string clpath = "clusters[" + cluster_name + "].cluster";
    if (!cl["server"]) throw std::runtime_error(clpath + ".server: required");
    k.server = scalar(cl["server"], clpath + ".server");
    if (k.server.rfind("https://", 0) != 0 && k.server.rfind("http://", 0) != 0)
      throw std::runtime_error(clpath + ".server: '" + k.server + "' is not an http(s) URL");
    while (!k.server.empty() && k.server.back() == '/') k.server.pop_back();
    if (cl["certificate-authority"] && cl["certificate-authority-data"])
      throw std::runtime_error(clpath + ": set certificate-authority or certificate-authority-data, not both");
    if (cl["certificate-authority"]) k.ca_file = scalar(cl["certificate-authority"], clpath + ".certificate-authority");
    if (cl["certificate-authority-data"]) {
      const std::string f = clpath + ".certificate-authority-data";
      auto pem = base64_decode(scalar(cl["certificate-authority-data"], f), Base64::kStandard);
      if (!pem) throw std::runtime_error(f + ": not base64");
      if (greenshard::pem_certificate_count(*pem) == 0) throw std::runtime_error(f + ": holds no PEM certificate");
      k.ca_file = write_ca(*pem, ca_dir);
    }
    if (cl["insecure-skip-tls-verify"]) {
      const std::string v = scalar(cl["insecure-skip-tls-verify"], clpath + ".insecure-skip-tls-verify");
      if (v != "true" && v != "false")
        throw std::runtime_error(clpath + ".insecure-skip-tls-verify: expected true or false");
      k.insecure_skip_verify = v == "true";
    }

    const YAML::Node u = named(root, "users", user_name, "user");
    const std::string upath = "users[" + user_name + "].user";
    if (u["token"]) k.token = scalar(u["token"], upath + ".token");
    if (u["tokenFile"]) {
      k.token_file = scalar(u["tokenFile"], upath + ".tokenFile");
      k.token = trim(read_file(k.token_file, upath + ".tokenFile"));
    }
    if (k.token.empty()) throw std::runtime_error(upath + ": a token or tokenFile is required");
    return k;
  } catch (const std::exception& e) {
    throw std::runtime_error("kubeconfig '" + origin + "': " + e.what());
  }
}

KubeClusterConfig read_kubeconfig_file(const std::string& path, const std::string& ca_dir) {
  return parse_kubeconfig(read_file(path, "kubeconfig"), path, ca_dir);
}

KubeClusterConfig in_cluster_config_at(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host) throw std::runtime_error("in_cluster: KUBERNETES_SERVICE_HOST is not set");
  if (!port || !*port) throw std::runtime_error("in_cluster: KUBERNETES_SERVICE_PORT is not set");
  const std::string h = host;
  KubeClusterConfig k;
  k.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  k.token_file = sa_dir + "/token";
  k.token = trim(read_file(k.token_file, "in_cluster: service account token"));
  if (k.token.empty()) throw std::runtime_error("in_cluster: service account token '" + k.token_file + "' is empty");
  k.ca_file = sa_dir + "/ca.crt";
  if (greenshard::pem_certificate_count(read_file(k.ca_file, "in_cluster: service account CA")) == 0)
    throw std::runtime_error("in_cluster: '" + k.ca_file + "' holds no PEM certificate");
  k.namespace_ = trim(read_file(sa_dir + "/namespace", "in_cluster: service account namespace"));
  return k;
}

std::unique_ptr<Executor> make_kubernetes_executor(const KubeClusterConfig& cluster,
                                                   std::chrono::milliseconds grace, WorkerDefaults defaults) {
  return std::make_unique<KubernetesExecutor>(cluster, grace, std::move(defaults));
}

}  // namespace controller
