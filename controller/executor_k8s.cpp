// Kubernetes executor: Indexed Job + headless Service + ConfigMap through the
// Kubernetes REST API (see executor_k8s.h).
#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
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

namespace controller {

using json = nlohmann::json;

namespace {

struct Gang {
  std::string name;
  bool stopping = false;
};

class KubernetesExecutor final : public Executor {
 public:
  KubernetesExecutor(KubeClusterConfig c, std::chrono::milliseconds grace, WorkerDefaults d)
      : c_(std::move(c)), grace_(grace), defaults_(std::move(d)) {}

  std::string kind() const override { return "kubernetes"; }

  GangStatus start(const GangSpec& g) override {
    KubeObjects o = render_kube_objects(g, c_, grace_, "", defaults_);
    const std::string ns = c_.namespace_;
    json created = call("POST", "/apis/batch/v1/namespaces/" + ns + "/jobs", o.job, {201, 200});
    const std::string uid = created["metadata"].value("uid", "");
    if (uid.empty()) throw std::runtime_error("kubernetes: created Job " + o.name + " has no uid");
    KubeObjects owned = render_kube_objects(g, c_, grace_, uid, defaults_);
    call("POST", "/api/v1/namespaces/" + ns + "/services", owned.service, {201, 200});
    call("POST", "/api/v1/namespaces/" + ns + "/configmaps", owned.config_map, {201, 200});
    {
      std::lock_guard<std::mutex> l(mu_);
      gangs_[g.job_id] = {o.name, false};
      procs_[g.job_id] = g.spec.procs_per_node;
    }
    GangStatus st;
    st.phase = GangPhase::kStarting;
    st.runtime = {{"executor", "kubernetes"}, {"name", o.name}, {"uid", uid}, {"namespace", ns},
                  {"procs_per_node", g.spec.procs_per_node}};
    return st;
  }

  GangStatus poll(const std::string& id) override {
    GangStatus st;
    std::string name = name_of(id);
    if (name.empty()) {
      st.phase = GangPhase::kUnknown;
      st.message = "no such gang in this cluster";
      return st;
    }
    st.runtime = {{"executor", "kubernetes"}, {"name", name}, {"namespace", c_.namespace_}};
    int code = 0;
    json job = get("/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name, &code);
    if (code == 404) {
      forget(id);
      st.phase = GangPhase::kFailed;
      st.message = "Job " + name + " disappeared from the cluster";
      return st;
    }
    const json status = job.value("status", json::object());
    for (const auto& cond : status.value("conditions", json::array())) {
      if (cond.value("status", "") != "True") continue;
      const std::string type = cond.value("type", "");
      if (type == "Complete") {
        forget(id);
        st.phase = GangPhase::kSucceeded;
        st.message = "Job " + name + " completed";
        return st;
      }
      if (type == "Failed") {
        st.phase = GangPhase::kFailed;
        st.message = "Job " + name + " failed: " + cond.value("reason", "") + " " + cond.value("message", "");
        if (any_pod_exit(name, 2)) {
          st.phase = GangPhase::kConfigError;
          st.message += " (a worker exited 2: bad configuration)";
        }
        // The gang restarts as a new Job; remove this one (and, through the
        // owner references, its Service and ConfigMap).
        remove(name);
        forget(id);
        return st;
      }
    }
    const bool suspended = job["spec"].value("suspend", false);
    st.phase = (!suspended && status.value("active", 0) > 0) ? GangPhase::kRunning : GangPhase::kStarting;
    return st;
  }

  void stop(const std::string& id, std::chrono::milliseconds) override {
    std::string name = name_of(id);
    if (name.empty()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      gangs_[id].stopping = true;
    }
    remove(name);
  }

  void tick() override {}

  bool gone(const std::string& id) override {
    std::string name = name_of(id);
    if (name.empty()) return true;
    int code = 0;
    get("/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name, &code);
    if (code == 404) {
      forget(id);
      return true;
    }
    return false;
  }

  bool adopt(const std::string& id, const json& runtime, std::chrono::milliseconds) override {
    if (!runtime.is_object() || runtime.value("executor", "") != "kubernetes") return false;
    const std::string name = runtime.value("name", "");
    if (name.empty()) return false;
    int code = 0;
    json job = get("/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name, &code);
    if (code != 200) return false;
    std::lock_guard<std::mutex> l(mu_);
    gangs_[id] = {name, false};
    procs_[id] = runtime.value("procs_per_node", 1);
    return true;
  }

  std::optional<std::string> logs(const std::string& id, int rank, int64_t offset,
                                  int64_t max_bytes) override {
    std::string name = name_of(id);
    if (name.empty()) return std::nullopt;
    int ppn;
    {
      std::lock_guard<std::mutex> l(mu_);
      ppn = std::max(1, procs_[id]);
    }
    int code = 0;
    json pods = get("/api/v1/namespaces/" + c_.namespace_ + "/pods?labelSelector=" +
                        httplib::detail::encode_query_param("job-name=" + name +
                                                            ",batch.kubernetes.io/job-completion-index=" +
                                                            std::to_string(rank / ppn)),
                    &code);
    if (code != 200 || pods.value("items", json::array()).empty()) return std::nullopt;
    std::string pod = pods["items"][0]["metadata"].value("name", "");
    auto res = client().Get("/api/v1/namespaces/" + c_.namespace_ + "/pods/" + pod + "/log");
    if (!res || res->status != 200) return std::nullopt;
    if (offset >= int64_t(res->body.size())) return std::string();
    return res->body.substr(size_t(offset), size_t(max_bytes));
  }

 private:
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
    std::string msg = j.is_object() ? j.value("message", res->body) : res->body;
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

  void remove(const std::string& name) {
    auto cli = client();
    json opts = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
    auto res = cli.Delete("/apis/batch/v1/namespaces/" + c_.namespace_ + "/jobs/" + name, opts.dump(),
                          "application/json");
    (void)res;  // 404: already gone; errors are retried by the next stop/gone
  }

  bool any_pod_exit(const std::string& name, int exit_code) {
    int code = 0;
    json pods = get("/api/v1/namespaces/" + c_.namespace_ + "/pods?labelSelector=" +
                        httplib::detail::encode_query_param("job-name=" + name),
                    &code);
    for (const auto& p : pods.value("items", json::array()))
      for (const auto& cs : p["status"].value("containerStatuses", json::array()))
        if (cs.contains("state") && cs["state"].contains("terminated") &&
            cs["state"]["terminated"].value("exitCode", -1) == exit_code)
          return true;
    return false;
  }

  std::string name_of(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = gangs_.find(id);
    return it == gangs_.end() ? "" : it->second.name;
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
  std::map<std::string, int> procs_;
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

// Number of X.509 certificates in PEM text (0 when none parse).
int pem_certificates(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), int(pem.size()));
  if (!bio) return 0;
  int n = 0;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_free(x);
    ++n;
  }
  BIO_free(bio);
  return n;
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
      if (pem_certificates(*pem) == 0) throw std::runtime_error(f + ": holds no PEM certificate");
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
  if (pem_certificates(read_file(k.ca_file, "in_cluster: service account CA")) == 0)
    throw std::runtime_error("in_cluster: '" + k.ca_file + "' holds no PEM certificate");
  k.namespace_ = trim(read_file(sa_dir + "/namespace", "in_cluster: service account namespace"));
  return k;
}

std::unique_ptr<Executor> make_kubernetes_executor(const KubeClusterConfig& cluster,
                                                   std::chrono::milliseconds grace, WorkerDefaults defaults) {
  return std::make_unique<KubernetesExecutor>(cluster, grace, std::move(defaults));
}

}  // namespace controller
