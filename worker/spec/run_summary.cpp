#include "worker/spec/run_summary.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace greenshard {

std::string_view to_string(RunEnd e) {
  switch (e) {
    case RunEnd::kSucceeded: return "succeeded";
    case RunEnd::kPreempted: return "preempted";
  }
  return "";
}

std::optional<RunEnd> parse_run_end(std::string_view s) {
  for (RunEnd e : {RunEnd::kSucceeded, RunEnd::kPreempted})
    if (to_string(e) == s) return e;
  return std::nullopt;
}

namespace {
template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json to_json(const RunSummary& s) {
  return {{"state", std::string(to_string(s.state))},
          {"steps", or_null(s.steps)},
          {"tokens", or_null(s.tokens)},
          {"final_val_loss", or_null(s.final_val_loss)},
          {"energy_joules", or_null(s.energy_joules)},
          {"operational_grams", or_null(s.operational_grams)},
          {"embodied_grams", or_null(s.embodied_grams)}};
}

std::optional<RunSummary> parse_run_summary(std::string_view text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<RunSummary> {
    if (error) *error = why;
    return std::nullopt;
  };
  if (text.size() > kMaxRunSummaryBytes)
    return fail(std::to_string(text.size()) + " bytes, more than the " + std::to_string(kMaxRunSummaryBytes) +
                " a summary may have");
  // depth 0 is the summary itself; a container inside it is skipped whole.
  auto flat = [](int depth, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    const bool opens = ev == nlohmann::json::parse_event_t::object_start ||
                       ev == nlohmann::json::parse_event_t::array_start;
    return !(opens && depth > 0);
  };
  const nlohmann::json j = nlohmann::json::parse(text, flat, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail("not JSON");
  return read_run_summary(j, error);
}

std::optional<RunSummary> read_run_summary(const nlohmann::json& j, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<RunSummary> {
    if (error) *error = why;
    return std::nullopt;
  };
  if (!j.is_object()) return fail("expected an object");
  RunSummary s;
  auto state = j.find("state");
  if (state == j.end() || !state->is_string()) return fail("state: expected succeeded or preempted");
  const auto end = parse_run_end(state->get_ref<const std::string&>());
  if (!end) {
    std::string got = state->get<std::string>().substr(0, 32);
    for (char& c : got)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return fail("state: expected succeeded or preempted, got '" + got + "'");
  }
  s.state = *end;
  // Each field in turn; the first of the wrong type is named.
  const char* bad = nullptr;
  auto number = [&](const char* key, auto& out) {
    auto it = j.find(key);
    if (bad || it == j.end() || it->is_null()) return;
    using T = typename std::decay_t<decltype(out)>::value_type;
    // Counters and measures are never negative; an integer must fit int64.
    const bool fits = std::is_integral_v<T>
                          ? it->is_number_integer() &&
                                !(it->is_number_unsigned() && it->template get<uint64_t>() > uint64_t(INT64_MAX)) &&
                                it->template get<int64_t>() >= 0
                          : it->is_number() && std::isfinite(it->template get<double>()) && it->template get<double>() >= 0;
    if (!fits) {
      bad = key;
      return;
    }
    out = it->template get<T>();
  };
  number("steps", s.steps);
  number("tokens", s.tokens);
  number("final_val_loss", s.final_val_loss);
  number("energy_joules", s.energy_joules);
  number("operational_grams", s.operational_grams);
  number("embodied_grams", s.embodied_grams);
  if (bad) return fail(std::string(bad) + ": expected a number >= 0");
  return s;
}

}  // namespace greenshard
