// Kubernetes executor: Indexed Job + headless Service + ConfigMap through the
// Kubernetes REST API (see executor_k8s.h).
#include <httplib.h>

#include <mutex>

#include "controller/executor_k8s.h"

namespace controller {

using json = nlohmann::json;

namespace {

struct Gang {
  std::string name;
  bool stopping = false;
};

class KubernetesExecutor final : public Executor {
 public:
  KubernetesExecutor(KubeClusterConfig c, std::chrono::milliseconds grace)
      : c_(std::move(c)), grace_(grace) {}

  std::string kind() const override { return "kubernetes"; }

  GangStatus start(const GangSpec& g) override {
    KubeObjects o = render_kube_objects(g, c_, grace_);
    const std::string ns = c_.namespace_;
    json created = call("POST", "/apis/batch/v1/namespaces/" + ns + "/jobs", o.job, {201, 200});
    const std::string uid = created["metadata"].value("uid", "");
    if (uid.empty()) throw std::runtime_error("kubernetes: created Job " + o.name + " has no uid");
    KubeObjects owned = render_kube_objects(g, c_, grace_, uid);
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
  std::mutex mu_;
  std::map<std::string, Gang> gangs_;
  std::map<std::string, int> procs_;
};

}  // namespace

std::unique_ptr<Executor> make_kubernetes_executor(const KubeClusterConfig& cluster,
                                                   std::chrono::milliseconds grace) {
  return std::make_unique<KubernetesExecutor>(cluster, grace);
}

}  // namespace controller
