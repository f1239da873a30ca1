// What a checkpoint's record ("extra") carries besides the shards: the data
// position (the step), running totals across all ranks and runs, the CPU RNG
// state, and the model card (worker/model_card.h) that `sample` reads.
// No LibTorch here.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace greenshard {

struct RunState {
  int64_t step = 0;
  double tokens = 0;           // all ranks
  double best_val = INFINITY, last_val = NAN;
  double energy_j = 0, operational_g = 0, embodied_g = 0;  // all ranks
  double wall_s = 0;
  std::string rng;             // default CPU generator state (bytes)
  std::string card;            // the model card as JSON ("" = none)

  // JSON: {"step", "tokens", "best_val", "energy_j", "operational_g",
  // "embodied_g", "wall_s", "rng" (hex), "card" (object, optional)}.
  std::string to_extra() const;
  // Throws std::runtime_error naming `dir` when the record is not one.
  static RunState from_extra(const std::string& extra, const std::string& dir);
};

}  // namespace greenshard
