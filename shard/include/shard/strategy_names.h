// The sharding strategies and their names: the one list, shared by shard/
// (parse_sharding_strategy) and the job-spec schema the worker and the
// controller validate with (worker/config.cpp). No LibTorch here: the
// controller reaches this header through the `shard_names` INTERFACE target.
#pragma once

#include <array>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shard {

enum class ShardingStrategy {
  kFullShard,    // shard params/grads/optimizer; reshard after forward
  kShardGradOp,  // shard; keep params unsharded from forward to backward
  kNoShard,      // replicate; all-reduce gradients (the DDP baseline)
  kHybridShard,  // FULL_SHARD inside groups of G ranks, replicate across
};

struct ShardingStrategyName {
  ShardingStrategy strategy;
  const char* name;
};
inline constexpr std::array<ShardingStrategyName, 4> kShardingStrategies{{
    {ShardingStrategy::kFullShard, "FULL_SHARD"},
    {ShardingStrategy::kShardGradOp, "SHARD_GRAD_OP"},
    {ShardingStrategy::kNoShard, "NO_SHARD"},
    {ShardingStrategy::kHybridShard, "HYBRID_SHARD"},
}};

inline const char* to_string(ShardingStrategy s) {
  for (const auto& n : kShardingStrategies)
    if (n.strategy == s) return n.name;
  return "?";
}

// The strategy named `text` (case-insensitive); nullopt for anything else.
inline std::optional<ShardingStrategy> find_sharding_strategy(std::string_view text) {
  for (const auto& n : kShardingStrategies) {
    const std::string_view name = n.name;
    if (name.size() != text.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(text[i])) == name[i];
    if (same) return n.strategy;
  }
  return std::nullopt;
}

// "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD or HYBRID_SHARD" (for messages), or
// the names joined by `separator` when one is given ("FULL_SHARD | ...").
inline std::string sharding_strategy_names(std::string_view separator = {}) {
  std::string out;
  for (size_t i = 0; i < kShardingStrategies.size(); ++i) {
    if (i > 0)
      out += !separator.empty() ? std::string(separator) : i + 1 == kShardingStrategies.size() ? " or " : ", ";
    out += kShardingStrategies[i].name;
  }
  return out;
}

// The strategy named `text` (case-insensitive). Throws std::invalid_argument
// naming `field` on anything else.
inline ShardingStrategy parse_sharding_strategy(const std::string& text, const std::string& field = "strategy") {
  if (auto s = find_sharding_strategy(text)) return *s;
  throw std::invalid_argument(field + ": unknown sharding strategy '" + text + "' (expected " +
                              sharding_strategy_names() + ")");
}

}  // namespace shard
