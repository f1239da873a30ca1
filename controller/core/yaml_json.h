// YAML -> JSON for the job-spec and config readers: maps, sequences and
// scalars; an unquoted scalar becomes a bool, null, integer or finite number
// when it reads as one, a quoted scalar always stays a string.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace controller {

nlohmann::json yaml_to_json(const YAML::Node& node);

}  // namespace controller
