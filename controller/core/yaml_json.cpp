#include "controller/core/yaml_json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace controller {

nlohmann::json yaml_to_json(const YAML::Node& n) {
  using json = nlohmann::json;
  switch (n.Type()) {
    case YAML::NodeType::Null: return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& x : n) a.push_back(yaml_to_json(x));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: a string
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~") return nullptr;
      char* end = nullptr;
      errno = 0;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0' && errno == 0) return i;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(d)) return d;
      return s;
    }
    default: return nullptr;
  }
}

}  // namespace controller
