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

#include "controller/executors/executor_k8s.h"

#include "carbon/http_client.h"
#include "carbon/http_failure.h"
#include "controller/core/base64.h"
#include "controller/core/yaml_json.h"
#include "controller/executors/k8s_answers.h"
#include "worker/spec/ca_bundle.h"

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

// The API server's client: the cluster's CA and insecure-skip-tls-verify,
// its token; 5 s to connect, 30 s per read. Throws std::invalid_argument
// ("kubernetes server: ...") when the server is not a base URL.
carbon::HttpClientOptions api_server_options(const KubeClusterConfig& c) {
  try {
    carbon::parse_http_base_url(c.server);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("kubernetes server: ") + e.what());
  }
  carbon::HttpClientOptions o;
  o.base_url = c.server;
  o.verify = !c.insecure_skip_verify;
  o.ca_bundle = c.ca_file;
  o.connect_timeout = std::chrono::seconds(5);
  o.read_timeout = std::chrono::seconds(30);
  o.bearer_token = c.token;
  return o;
}

class KubernetesExecutor final : public Executor {
 public:
  KubernetesExecutor(KubeClusterConfig c, std::chrono::milliseconds grace, WorkerDefaults d)
      : c_(std::move(c)), api_(api_server_options(c_)), grace_(grace), defaults_(std::move(d)) {}

  std::string kind() const override { return "kubernetes"; }

  GangStatus start(const GangSpec& g) override {
    KubeObjects o = render_kube_objects(g, c_, grace_, "", defaults_);
    const std::string ns = c_.namespace_;
    json created = call("POST", "/apis/batch/v1/namespaces/" + ns + "/jobs", o.job, {201, 200});
    const std::string uid = k8s::read_job(created).uid;
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

  // Reads the Job (and, once it ended, its pods) and maps the answers to a
  // phase: k8s::decide (k8s_answers.h has the table).
  GangStatus poll(const std::string& id) override {
    Gang g;
    if (!find(id, &g)) {
      GangStatus st;
      st.phase = GangPhase::kUnknown;
      st.message = "no such gang in this cluster";
      return st;
    }
    int code = 0;
    const k8s::JobAnswer job = k8s::read_job(get(job_path(g.name), &code));
    k8s::PodsVerdict pods;  // read once the Job ended (an unanswered pod list: an empty verdict)
    if (code == 200 && job.end != k8s::JobAnswer::End::kNone) {
      int pods_code = 0;
      pods = k8s::read_pods(get(pods_path(g.name, -1), &pods_code));
    }
    k8s::Decision d = k8s::decide(g.name, code, job, pods, g.stop_requested, g.last);
    if (d.remove) remove(g.name, d.remove);
    d.status.runtime = runtime_of(g);
    std::lock_guard<std::mutex> l(mu_);
    if (d.forget) gangs_.erase(id);
    else if (auto it = gangs_.find(id); it != gangs_.end()) it->second.last = d.status.phase;
    return d.status;
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
    remove(name, k8s::kStopPropagation);
  }

  void tick() override {}

  bool gone(const std::string& id) override {
    Gang g;
    if (!find(id, &g)) return true;
    int code = 0;
    const k8s::JobAnswer job = k8s::read_job(get(job_path(g.name), &code));
    if (code == 404) {
      forget(id);
      return true;
    }
    if (code == 200 && g.stop_requested && !job.deleting)
      remove(g.name, k8s::kStopPropagation);  // retry a delete that did not get through
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
    if (k8s::string_at(runtime, "executor") != "kubernetes") return false;
    Gang g;
    g.name = k8s::string_at(runtime, "name");
    if (g.name.empty()) return false;
    g.uid = k8s::string_at(runtime, "uid");
    g.procs_per_node = std::max(1, k8s::int_at(runtime, "procs_per_node", 1));
    g.stop_requested = runtime.value("stop_requested", json(false)) == true || o.stop_requested;
    int code = 0;
    const k8s::JobAnswer job = k8s::read_job(get(job_path(g.name), &code));
    if (code == 404 && !g.stop_requested) return false;
    if (code == 200) {
      if (!g.uid.empty() && job.uid != g.uid) return false;  // another Job of that name
      if (g.stop_requested && !job.deleting) remove(g.name, k8s::kStopPropagation);
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
    const json pods = get(pods_path(g.name, rank / ppn), &code);
    const std::string pod = code == 200 ? k8s::first_pod_name(pods) : "";
    if (pod.empty()) return std::nullopt;
    auto res = client().Get("/api/v1/namespaces/" + c_.namespace_ + "/pods/" + pod + "/log");
    if (!res || res->status != 200) return std::nullopt;
    if (offset >= int64_t(res->body.size())) return std::string();
    return res->body.substr(size_t(offset), size_t(max_bytes));
  }

 private:
  json runtime_of(const Gang& g) const {
    json rt = {{"executor", "kubernetes"}, {"name", g.name}, {"uid", g.uid}, {"namespace", c_.namespace_},
               {"procs_per_node", g.procs_per_node}};
    if (g.stop_requested) rt["stop_requested"] = true;
    return rt;
  }

  std::string job_path(const std::string& name) const {
    return "/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name;
  }

  // The pods of Job `name`: all of them (index < 0), or those of one completion index.
  std::string pods_path(const std::string& name, int index) const {
    std::string selector = "job-name=" + name;
    if (index >= 0) selector += ",batch.kubernetes.io/job-completion-index=" + std::to_string(index);
    return "/api/v1/namespaces/" + c_.namespace_ + "/pods?labelSelector=" +
           httplib::detail::encode_query_param(selector);
  }

  httplib::Client client() const { return carbon::make_http_client(api_); }

  json call(const std::string& method, const std::string& path, const json& body,
            std::initializer_list<int> ok) {
    auto cli = client();
    const auto sent = std::chrono::steady_clock::now();
    auto res = method == "POST" ? cli.Post(path, body.dump(), "application/json")
                                : cli.Delete(path, body.dump(), "application/json");
    if (!res)
      throw std::runtime_error("kubernetes " + method + " " + path + ": " +
                               carbon::explain_http_failure(res, cli, api_, sent).cause);
    for (int c : ok)
      if (res->status == c) {
        auto j = json::parse(res->body, nullptr, false);
        return j.is_discarded() ? json::object() : j;
      }
    auto j = json::parse(res->body, nullptr, false);
    std::string msg = k8s::string_at(j, "message");
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
    return k8s::parse_object(res->body);
  }

  void remove(const std::string& name, const char* propagation) {
    auto cli = client();
    json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", propagation}};
    auto res = cli.Delete(job_path(name), opts.dump(), "application/json");
    (void)res;  // 404: already gone; a stop's delete is retried by poll() and gone()
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
  carbon::HttpClientOptions api_;  // from c_
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
  return yaml_scalar<std::string>(n, path, "expected a string");
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
      k.insecure_skip_verify =
          yaml_scalar<bool>(cl["insecure-skip-tls-verify"], clpath + ".insecure-skip-tls-verify", "expected true or false");
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
