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
// Checkpoints: the "checkpoints" volume at /checkpoints is the region's
// checkpoint_claim PVC or an emptyDir, and GREENSHARD_CHECKPOINT_DIR is
// /checkpoints/<job-id> (GREENSHARD_SUMMARY_PATH in it). With checkpoint_s3
// (regions.h) GREENSHARD_CHECKPOINT_DIR is <url>/<job-id>; the pod gets
// AWS_ENDPOINT_URL_S3, AWS_REGION (when configured), the Secret as the
// read-only volume "s3-credentials" at /etc/greenshard/s3 and
// GREENSHARD_S3_SECRET_DIR naming it (no credential is an env value), and
// /checkpoints stays an emptyDir for GREENSHARD_SUMMARY_PATH
// (/checkpoints/summary.json).
// It follows the Job's status (and, once it ended, its pods: exit codes,
// DisruptionTarget conditions, termination messages; the mapping to
// GangPhase is at KubernetesExecutor::poll and in docs/controller.md) and
// deletes the Job on stop with propagationPolicy Foreground, so the Job
// stays until its pods have checkpointed and ended. A stop the controller
// requested makes the gang's end (Complete, or the Job gone) kPreempted,
// never kFailed; the request is kept in the runtime ("stop_requested"; the
// scheduler's own stop comes as AdoptOptions::stop_requested) and survives
// adopt(), which then watches
// the gang again even when its Job is already gone.
//
// Worker defaults (the chart's worker-defaults.yaml, read from the file named
// by GREENSHARD_WORKER_DEFAULTS_FILE) add cluster policy to every worker pod:
//   image, imagePullPolicy        default image (a job's own `image` wins);
//   imagePullSecrets              [{name}] on the pod;
//   terminationGracePeriodSeconds the pod's grace (else the executor's);
//   automountServiceAccountToken  on the pod;
//   resources                     {requests, limits} of quantities; the job's
//                                 gpus_per_node always sets nvidia.com/gpu
//                                 (and removes it for a CPU-only job);
//   env                           EnvVar objects (NCCL_*, ...), after the
//                                 controller's; names the controller sets
//                                 (MASTER_*, WORLD_SIZE, RANK, PET_*,
//                                 JOB_COMPLETION_INDEX, GREENSHARD_*) are refused,
//                                 but GREENSHARD_CA_BUNDLE (the CA the worker
//                                 verifies an https:// controller with), whose
//                                 value must be a file under one of the
//                                 volumeMounts;
//                                 AWS_ENDPOINT_URL_S3 / AWS_REGION are dropped
//                                 where the region's checkpoint_s3 sets them;
//   volumes, volumeMounts         e.g. /tmp and /dev/shm (emptyDir, medium
//                                 Memory); every mount names a volume; the
//                                 controller's job-spec/checkpoints/s3-credentials
//                                 volumes and their paths are refused;
//   podSecurityContext, securityContext, nodeSelector, tolerations, affinity,
//   priorityClassName             copied onto the pod / container.
// Unknown keys and wrong types are errors naming the key path
// ("worker-defaults.yaml: tolerations[0].effect: ...").
#pragma once

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "controller/executors/executor.h"
#include "controller/executors/k8s_manifest.h"
#include "controller/core/region_config.h"

namespace controller {

// Connection settings from a kubeconfig (its current-context): the cluster's
// server, certificate-authority (a file) or certificate-authority-data
// (inline base64 PEM), insecure-skip-tls-verify; the user's token or
// tokenFile; the context's namespace. Inline CA data is decoded, checked to
// hold PEM certificates, and written to a content-addressed file
// <ca_dir>/<sha256>.crt (ca_dir "" = $TMPDIR/greenshard-kube-ca-<uid>, made
// 0700) that becomes ca_file. Throws std::runtime_error
// "kubeconfig '<origin>': <key path>: <problem>".
KubeClusterConfig parse_kubeconfig(const std::string& text, const std::string& origin,
                                   const std::string& ca_dir = "");
KubeClusterConfig read_kubeconfig_file(const std::string& path, const std::string& ca_dir = "");
// The in-cluster service account: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (IPv6 hosts bracketed), <sa_dir>/token, <sa_dir>/ca.crt, <sa_dir>/namespace.
// Throws std::runtime_error naming the missing variable or file.
KubeClusterConfig in_cluster_config_at(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Its client of the API server is carbon::make_http_client's; a request
// that gets no answer is an error naming the cause (carbon/http_failure.h).
// Throws std::invalid_argument ("kubernetes server: '<server>' has a path
// ...") when cluster.server is not a base URL (carbon::parse_http_base_url).
std::unique_ptr<Executor> make_kubernetes_executor(const KubeClusterConfig& cluster,
                                                   std::chrono::milliseconds grace = std::chrono::seconds(30),
                                                   WorkerDefaults defaults = {});

}  // namespace controller
