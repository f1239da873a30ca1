// libFuzzer target for the Kubernetes executor's readers of API answers
// (controller/executor_k8s.cpp: adopt, poll with its Job-status and pod
// verdicts, logs). They read straight from cpp-httplib, so this fuzzer runs
// a loopback API server that answers the fuzz input: byte 0 picks the Job's
// HTTP status and whether a stop was requested, byte 1 the pods' status;
// the rest is the Job's JSON, then "\n@@pods\n" and the pod list's JSON.
// poll() must not throw or trip a sanitizer whatever the answer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "controller/executor_k8s.h"

namespace {
std::mutex g_mu;
std::string g_job, g_pods;
int g_job_status = 200, g_pods_status = 200;

int server_port() {
  static const int port = [] {
    static httplib::Server srv;
    srv.Get(".*", [](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> l(g_mu);
      if (req.path.find("/log") != std::string::npos) {
        res.set_content("line 1\nline 2\n", "text/plain");
      } else if (req.path.find("/pods") != std::string::npos) {
        res.status = g_pods_status;
        res.set_content(g_pods, "application/json");
      } else {
        res.status = g_job_status;
        res.set_content(g_job, "application/json");
      }
    });
    srv.Delete(".*", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"kind":"Status","status":"Success"})", "application/json");
    });
    const int p = srv.bind_to_any_port("127.0.0.1");
    if (p <= 0) std::abort();
    std::thread([] { srv.listen_after_bind(); }).detach();
    while (!srv.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return p;
  }();
  return port;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const int kStatus[4] = {200, 404, 500, 200};
  const std::string in(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::string sep = "\n@@pods\n";
  const size_t at = in.find(sep);
  {
    std::lock_guard<std::mutex> l(g_mu);
    g_job = in.substr(0, at);
    g_pods = at == std::string::npos ? "" : in.substr(at + sep.size());
    g_job_status = kStatus[data[0] & 3];
    g_pods_status = kStatus[data[1] & 3];
  }
  controller::KubeClusterConfig c;
  c.server = "http://127.0.0.1:" + std::to_string(server_port());
  c.token = "fuzz-token";
  c.namespace_ = "training";
  auto ex = controller::make_kubernetes_executor(c, std::chrono::milliseconds(1000));
  nlohmann::json rt = {{"executor", "kubernetes"}, {"name", "gs-j1-1"}, {"uid", (data[0] & 8) ? "u-1" : ""},
                       {"namespace", "training"}, {"procs_per_node", 1 + (data[1] >> 6)}};
  if (data[0] & 4) rt["stop_requested"] = true;
  if (!ex->adopt("j1", rt, controller::AdoptOptions{std::chrono::milliseconds(1000), (data[0] & 64) != 0})) return 0;
  (void)ex->poll("j1");
  if (data[0] & 16) (void)ex->logs("j1", data[1] & 7, 0, 64);
  if (data[0] & 32) (void)ex->gone("j1");
  return 0;
}
