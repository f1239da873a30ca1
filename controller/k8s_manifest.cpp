// Pure JobSpec -> Kubernetes objects (see executor_k8s.h).
#include "controller/executor_k8s.h"

namespace controller {

using json = nlohmann::json;

std::string kube_name(const std::string& job_id, int attempt) {
  return "gs-" + job_id + "-" + std::to_string(attempt);
}

KubeObjects render_kube_objects(const GangSpec& g, const KubeClusterConfig& c,
                                std::chrono::milliseconds grace, const std::string& uid) {
  KubeObjects o;
  o.name = kube_name(g.job_id, g.attempt);
  const std::string& ns = c.namespace_;
  const int nodes = g.spec.nodes, ppn = g.spec.procs_per_node;
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
  add("MASTER_ADDR", master);
  add("MASTER_PORT", port);
  add("WORLD_SIZE", std::to_string(nodes * ppn));
  if (ppn == 1) env.push_back({{"name", "RANK"}, {"valueFrom", index_ref}});
  add("PET_NNODES", std::to_string(nodes));
  add("PET_NPROC_PER_NODE", std::to_string(ppn));
  env.push_back({{"name", "PET_NODE_RANK"}, {"valueFrom", index_ref}});
  env.push_back({{"name", "JOB_COMPLETION_INDEX"}, {"valueFrom", index_ref}});
  add("PET_MASTER_ADDR", master);
  add("PET_MASTER_PORT", port);
  add("GREENSHARD_JOB_ID", g.job_id);
  add("GREENSHARD_CHECKPOINT_DIR", "/checkpoints/" + g.job_id);
  add("GREENSHARD_SUMMARY_PATH", "/checkpoints/" + g.job_id + "/summary.json");
  add("GREENSHARD_METRICS_PORT", "9400");
  add("GREENSHARD_REGION", g.region);
  add("GREENSHARD_GRID_INTENSITY", std::to_string(g.intensity));
  add("GREENSHARD_PUE", std::to_string(g.pue));
  add("GREENSHARD_STATUS_URL", g.status_url);
  add("GREENSHARD_STATUS_TOKEN", g.status_token);
  if (!g.intensity_url.empty()) add("GREENSHARD_INTENSITY_URL", g.intensity_url);

  json container = {
      {"name", "worker"},
      {"image", g.spec.image.empty() ? c.image : g.spec.image},
      {"command", {"greenshard-worker", "--config", "/etc/greenshard/job.json"}},
      {"env", env},
      {"ports", {{{"name", "rendezvous"}, {"containerPort", c.rendezvous_port}, {"protocol", "TCP"}},
                 {{"name", "metrics"}, {"containerPort", 9400}, {"protocol", "TCP"}}}},
      {"volumeMounts", {{{"name", "job-spec"}, {"mountPath", "/etc/greenshard"}, {"readOnly", true}},
                        {{"name", "checkpoints"}, {"mountPath", "/checkpoints"}}}}};
  if (g.spec.gpus_per_node > 0) {
    json q = {{"nvidia.com/gpu", std::to_string(g.spec.gpus_per_node)}};
    container["resources"] = {{"requests", q}, {"limits", q}};
  }
  json ckpt_volume = c.checkpoint_claim.empty()
                         ? json{{"name", "checkpoints"}, {"emptyDir", json::object()}}
                         : json{{"name", "checkpoints"},
                                {"persistentVolumeClaim", {{"claimName", c.checkpoint_claim}}}};
  const int64_t grace_s = std::max<int64_t>(1, grace.count() / 1000);

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
              {{"metadata", {{"labels", labels}}},
               {"spec", {{"subdomain", o.name},
                         {"restartPolicy", "Never"},
                         {"terminationGracePeriodSeconds", grace_s},
                         {"containers", {container}},
                         {"volumes", {{{"name", "job-spec"}, {"configMap", {{"name", o.name}}}},
                                      ckpt_volume}}}}}}}}};
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
