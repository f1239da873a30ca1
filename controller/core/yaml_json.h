// YAML -> JSON for the job-spec and config readers: maps, sequences and
// scalars; an unquoted scalar becomes a bool, null, integer or finite number
// when it reads as one, a quoted scalar always stays a string.
//
// yaml_scalar: the one reader of a typed scalar (std::string, bool, int,
// long long, double) from a YAML node of the controller's own files
// (regions, carbon source, hardware, quotas, kubeconfig).
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>

namespace controller {

nlohmann::json yaml_to_json(const YAML::Node& node);

// n as a T, or std::runtime_error("<where>: <expected>") when n is missing,
// not a scalar (a map, a list, null) or does not convert. Conversions are
// yaml-cpp's: an integer must be a whole number in T's range; a bool is
// true/false, yes/no, on/off, y/n (lower case, Capitalised or UPPER CASE).
// Callers name the field in `where` ("regions.yaml: regions[0].nodes") and
// say what they wanted in `expected` ("expected an integer", "wrong type").
template <class T>
T yaml_scalar(const YAML::Node& n, const std::string& where, const std::string& expected) {
  try {
    if (n && n.IsScalar()) return n.as<T>();
  } catch (const YAML::Exception&) {
  }
  throw std::runtime_error(where + ": " + expected);
}

}  // namespace controller
