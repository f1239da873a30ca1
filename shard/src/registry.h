// Registry: module -> (runtime, unit), for shard::forward_unit.
#pragma once

namespace torch::nn {
class Module;
}

namespace shard {
class Runtime;
class Unit;

void register_unit(const torch::nn::Module* module, Runtime* rt, Unit* unit);
void unregister_runtime(Runtime* rt);
// {nullptr, nullptr} when the module is no unit of a live model.
struct UnitRef {
  Runtime* rt = nullptr;
  Unit* unit = nullptr;
};
UnitRef lookup_unit(const torch::nn::Module* module);

}  // namespace shard
