#include "worker/spec/status_push.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace greenshard {

namespace {
using json = nlohmann::json;

constexpr std::pair<RunPhase, std::string_view> kPhases[] = {{RunPhase::kRunning, "running"},
                                                             {RunPhase::kSucceeded, "succeeded"},
                                                             {RunPhase::kPreempted, "preempted"},
                                                             {RunPhase::kFailed, "failed"}};

json or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

std::string_view to_string(RunPhase p) {
  for (const auto& [v, name] : kPhases)
    if (v == p) return name;
  return "running";
}

std::optional<RunPhase> parse_run_phase(std::string_view s) {
  for (const auto& [v, name] : kPhases)
    if (name == s) return v;
  return std::nullopt;
}

RunPhase phase_of(RunEnd e) { return e == RunEnd::kPreempted ? RunPhase::kPreempted : RunPhase::kSucceeded; }

json to_json(const StatusPush& s) {
  return json{{"state", to_string(s.state)},
              {"step", s.step},
              {"total_steps", s.total_steps},
              {"tokens", s.tokens},
              {"loss", or_null(s.loss)},
              {"val_loss", or_null(s.val_loss)},
              {"tokens_per_s", s.tokens_per_s},
              {"mfu", s.mfu},
              {"eta_s", s.eta_s},
              {"energy_joules", s.energy_joules},
              {"operational_grams", s.operational_grams},
              {"embodied_grams", s.embodied_grams},
              {"message", s.message}};
}

StatusPush read_status_push(const json& b) {
  if (!b.is_object()) throw StatusPushError("invalid_body", "the status must be a JSON object", "");
  StatusPush p;
  bool have_state = false;
  auto number = [&](const std::string& k, const json& v) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw StatusPushError("invalid_field", k + ": expected a finite number >= 0", k);
    return v.get<double>();
  };
  auto integer = [&](const std::string& k, const json& v) {
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX);
    if (!(v.is_number_integer() || v.is_number_unsigned()) || too_big || v.get<int64_t>() < 0)
      throw StatusPushError("invalid_field", k + ": expected an integer >= 0", k);
    return v.get<int64_t>();
  };
  for (const auto& [k, v] : b.items()) {
    if (v.is_null() && k != "state" && k != "message") continue;  // not known yet
    if (k == "state") {
      const auto phase = v.is_string() ? parse_run_phase(v.get<std::string>()) : std::nullopt;
      if (!phase)
        throw StatusPushError("invalid_field", "state: expected running, succeeded, preempted or failed", "state");
      p.state = *phase;
      have_state = true;
    } else if (k == "step") p.step = integer(k, v);
    else if (k == "total_steps") p.total_steps = integer(k, v);
    else if (k == "tokens") p.tokens = integer(k, v);
    else if (k == "loss") p.loss = number(k, v);
    else if (k == "val_loss") p.val_loss = number(k, v);
    else if (k == "tokens_per_s") p.tokens_per_s = number(k, v);
    else if (k == "mfu") p.mfu = number(k, v);
    else if (k == "eta_s") p.eta_s = number(k, v);
    else if (k == "energy_joules") p.energy_joules = number(k, v);
    else if (k == "operational_grams") p.operational_grams = number(k, v);
    else if (k == "embodied_grams") p.embodied_grams = number(k, v);
    else if (k == "message") {
      if (!v.is_string() || v.get<std::string>().size() > kStatusMessageMaxBytes)
        throw StatusPushError("invalid_field",
                              "message: expected a string of at most " + std::to_string(kStatusMessageMaxBytes) +
                                  " bytes",
                              "message");
      p.message = v.get<std::string>();
    } else {
      throw StatusPushError("unknown_field", "unknown field", k);  // the key is untrusted: the reader's caller quotes it
    }
  }
  if (!have_state) throw StatusPushError("missing_field", "state: required", "state");
  return p;
}

}  // namespace greenshard
