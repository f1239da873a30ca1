#include "worker/run_state.h"

#include "shard/hex.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace greenshard {
namespace {
using json = nlohmann::json;
}  // namespace

std::string RunState::to_extra() const {
  json j{{"step", step},         {"tokens", tokens},           {"best_val", std::isfinite(best_val) ? best_val : -1.0},
         {"energy_j", energy_j}, {"operational_g", operational_g}, {"embodied_g", embodied_g},
         {"wall_s", wall_s},     {"rng", shard::to_hex(rng)}};
  if (!card.empty()) j["card"] = json::parse(card);
  return j.dump();
}

RunState RunState::from_extra(const std::string& extra, const std::string& dir) {
  RunState r;
  try {
    json j = json::parse(extra);
    r.step = j.at("step").get<int64_t>();
    r.tokens = j.at("tokens").get<double>();
    const double b = j.at("best_val").get<double>();
    r.best_val = b < 0 ? INFINITY : b;
    r.energy_j = j.at("energy_j").get<double>();
    r.operational_g = j.at("operational_g").get<double>();
    r.embodied_g = j.at("embodied_g").get<double>();
    r.wall_s = j.at("wall_s").get<double>();
    r.rng = shard::from_hex(j.at("rng").get<std::string>());
    if (j.contains("card")) r.card = j.at("card").dump();
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + dir + ": not written by greenshard-worker (" + e.what() + ")");
  }
  return r;
}

}  // namespace greenshard
