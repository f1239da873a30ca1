// DecisionOutcome: what one scheduling decision did with a job, as the
// scheduler records it in the store's decision log (DecisionRecord::outcome,
// kept there as the to_string spelling, so the SQLite format is text),
// counts it (greenshard_scheduler_decisions_total{outcome}) and as GET
// /v1/jobs/{id} shows it (`decisions[].outcome`; the OpenAPI document's enum
// is built from kAllDecisionOutcomes).
#pragma once

#include <optional>
#include <string_view>

namespace controller {

enum class DecisionOutcome {
  kAdmitted,    // placed: PENDING -> SCHEDULED with its windows
  kReplanned,   // a SCHEDULED job's plan changed (region, windows or widths)
  kDeferred,    // a PENDING job waits (recorded once per reason)
  kRequeued,    // a SCHEDULED job's plan no longer fits: back to PENDING
  kRejected,    // no allowed region can ever hold the job: FAILED
  kPreempting,  // running lower-priority jobs are stopped to make room for it
};

inline constexpr DecisionOutcome kAllDecisionOutcomes[] = {
    DecisionOutcome::kAdmitted, DecisionOutcome::kReplanned, DecisionOutcome::kDeferred,
    DecisionOutcome::kRequeued, DecisionOutcome::kRejected,  DecisionOutcome::kPreempting};

// "admitted", "replanned", ... (the API and store spelling).
constexpr std::string_view to_string(DecisionOutcome o) {
  switch (o) {
    case DecisionOutcome::kAdmitted: return "admitted";
    case DecisionOutcome::kReplanned: return "replanned";
    case DecisionOutcome::kDeferred: return "deferred";
    case DecisionOutcome::kRequeued: return "requeued";
    case DecisionOutcome::kRejected: return "rejected";
    case DecisionOutcome::kPreempting: return "preempting";
  }
  return "";
}

// Inverse of to_string; nullopt for an unknown name (case-sensitive).
constexpr std::optional<DecisionOutcome> parse_decision_outcome(std::string_view name) {
  for (DecisionOutcome o : kAllDecisionOutcomes)
    if (to_string(o) == name) return o;
  return std::nullopt;
}

}  // namespace controller
