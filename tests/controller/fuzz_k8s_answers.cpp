// libFuzzer target for the readers of the Kubernetes API's answers about a
// gang (controller/executors/k8s_answers.cpp: the code the Kubernetes executor runs on
// every Job and pod-list body it gets, with no HTTP in between): parse_object,
// read_job, read_pods, first_pod_name and decide().
// Input: byte 0 picks the Job's HTTP status (bits 0-1: 200, 404, 500, no
// answer), whether a stop was requested (bit 2) and the last phase reported
// (bits 4-6); byte 1 is spare; the rest is the Job's body, then "\n@@pods\n"
// and the pod list's body. Nothing may throw or trip a sanitizer, and the
// decision must keep decide()'s contract (k8s_answers.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "controller/executors/k8s_answers.h"

using namespace controller;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const int kStatus[4] = {200, 404, 500, 0};
  const int code = kStatus[data[0] & 3];
  const bool stop_requested = (data[0] & 4) != 0;
  const auto last = static_cast<GangPhase>(((data[0] >> 4) & 7) % 7);
  const std::string in(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::string sep = "\n@@pods\n";
  const size_t at = in.find(sep);
  const nlohmann::json job_body = k8s::parse_object(in.substr(0, at));
  const nlohmann::json pods_body = k8s::parse_object(at == std::string::npos ? "" : in.substr(at + sep.size()));
  if (!job_body.is_object() || !pods_body.is_object()) std::abort();

  const k8s::JobAnswer job = k8s::read_job(job_body);
  const bool ended = job.end != k8s::JobAnswer::End::kNone;
  const k8s::PodsVerdict pods = code == 200 && ended ? k8s::read_pods(pods_body) : k8s::PodsVerdict{};
  (void)k8s::first_pod_name(pods_body);
  // A summary taken is one the reader accepts: it writes back as it reads.
  if (pods.summary) {
    std::string error;
    const auto again = greenshard::read_run_summary(greenshard::to_json(*pods.summary), &error);
    if (!again || greenshard::to_json(*again) != greenshard::to_json(*pods.summary)) std::abort();
  }
  if (pods.config_error && !pods.failure_is_config) std::abort();  // exit 2 is the failure reported

  const k8s::Decision d = k8s::decide("gs-j1-1", code, job, pods, stop_requested, last);
  const GangPhase p = d.status.phase;
  // decide()'s contract.
  if (code == 404 && (!d.forget || p != (stop_requested ? GangPhase::kPreempted : GangPhase::kFailed))) std::abort();
  if ((code == 0 || code == 500) && (d.forget || d.remove || p != last)) std::abort();
  if (code == 200 && ended != d.forget) std::abort();
  if (code == 200 && !ended && p != GangPhase::kStarting && p != GangPhase::kRunning) std::abort();
  if (code == 200 && !ended && job.suspended && p != GangPhase::kStarting) std::abort();
  if (code == 200 && ended && (p == GangPhase::kStarting || p == GangPhase::kRunning || p == GangPhase::kUnknown))
    std::abort();
  if (code == 200 && stop_requested && ended && p != GangPhase::kPreempted && p != GangPhase::kConfigError &&
      p != GangPhase::kFailed)
    std::abort();
  if (d.remove && std::strcmp(d.remove, "Background") != 0 && std::strcmp(d.remove, k8s::kStopPropagation) != 0)
    std::abort();
  if (d.remove && std::strcmp(d.remove, "Background") == 0 && (stop_requested || job.end != k8s::JobAnswer::End::kFailed))
    std::abort();
  return 0;
}
