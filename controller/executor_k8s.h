// Kubernetes executor and its manifests.
//
// For a gang (one job attempt) the executor creates, in the region's
// cluster and namespace:
//   - an Indexed Job "gs-<id>-<attempt>" (completionMode: Indexed,
//     completions = parallelism = nodes, backoffLimit 0: the controller
//     restarts the whole gang itself), whose pods have subdomain = the
//     Service name, so node 0 is reachable as <job>-0.<service>; every pod
//     gets MASTER_ADDR/MASTER_PORT/WORLD_SIZE (RANK when one process per
//     node), PET_NNODES/PET_NPROC_PER_NODE/PET_NODE_RANK/PET_MASTER_*, and
//     JOB_COMPLETION_INDEX (both from the
//     batch.kubernetes.io/job-completion-index annotation), the GREENSHARD_*
//     variables of docs/worker-controller.md, nvidia.com/gpu requests and
//     limits, app.kubernetes.io/* labels, and a termination grace period
//     long enough for the worker to checkpoint on SIGTERM; spec.suspend is
//     set when a Kueue queue is configured (Kueue unsuspends it);
//   - a headless Service (clusterIP: None, publishNotReadyAddresses: true)
//     and a ConfigMap holding job.json, both owned by the Job
//     (ownerReferences), so deleting the Job removes them.
// It follows the Job's status (and its pods' exit codes on failure) and
// deletes the Job (propagationPolicy Background) on stop.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "controller/executor.h"
#include "controller/regions.h"

namespace controller {

struct KubeObjects {
  std::string name;          // Job, Service and ConfigMap name
  nlohmann::json job, service, config_map;
};

// Pure rendering (no I/O). `job_uid` is the created Job's uid for the
// owner references ("" renders none; the executor creates the Job first).
KubeObjects render_kube_objects(const GangSpec& gang, const KubeClusterConfig& cluster,
                                std::chrono::milliseconds grace, const std::string& job_uid = "");
// "gs-<id>-<attempt>".
std::string kube_name(const std::string& job_id, int attempt);

std::unique_ptr<Executor> make_kubernetes_executor(const KubeClusterConfig& cluster,
                                                   std::chrono::milliseconds grace = std::chrono::seconds(30));

}  // namespace controller
