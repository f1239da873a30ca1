#include "controller/core/api_types.h"

#include "controller/core/yaml_json.h"
#include "worker/spec/job_spec.h"

#include <carbon/job.h>
#include <carbon/time_ms.h>

#include <openssl/sha.h>
#include <yaml-cpp/depthguard.h>

#include <cstdio>
#include <ctime>
#include <regex>
#include <set>

namespace controller {
namespace {

using json = nlohmann::json;

// "an array", "an object", "a string", "a number", "a boolean", "null":
// what a type error says it got ("expected an object, got an array").
std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "null";
  }
}

// The bytes of a valid UTF-8 sequence starting at s[i] (1..4), 0 if none.
size_t utf8_seq(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 2) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

[[noreturn]] void bad(const std::string& field, const std::string& msg) {
  throw ApiError(400, "invalid_field", field + ": " + msg, field);
}

int64_t get_int(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !v.is_number_unsigned())
    bad(field, "expected an integer, got " + type_name(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad(field, "out of range");
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                   std::to_string(x));
  return x;
}

double get_num(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) bad(field, "expected a number, got " + type_name(v));
  double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::string get_str(const json& v, const std::string& field, size_t max_len) {
  if (!v.is_string()) bad(field, "expected a string, got " + type_name(v));
  auto s = v.get<std::string>();
  if (s.size() > max_len) bad(field, "longer than " + std::to_string(max_len) + " characters");
  return s;
}

bool is_dns_label(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return s.front() != '-' && s.back() != '-';
}

bool is_region_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

// elastic, migratable, scaling (the contract in api_types.h).
void parse_elastic(const json& body, JobSpec& s) {
  if (body.contains("elastic")) {
    const json& e = body["elastic"];
    if (!e.is_object()) bad("elastic", "expected an object {min_nodes, max_nodes}, got " + type_name(e));
    s.min_nodes = s.max_nodes = s.nodes;
    for (const auto& [k, v] : e.items()) {
      if (k == "min_nodes") s.min_nodes = int(get_int(v, "elastic.min_nodes", 1, kMaxNodes));
      else if (k == "max_nodes") s.max_nodes = int(get_int(v, "elastic.max_nodes", 1, kMaxNodes));
      else throw ApiError(400, "unknown_field", "unknown field " + quote_untrusted("elastic." + k), "elastic." + k);
    }
    if (s.min_nodes > s.nodes)
      bad("elastic.min_nodes", "must be at most nodes (" + std::to_string(s.nodes) + "), got " +
                                   std::to_string(s.min_nodes));
    if (s.max_nodes < s.nodes)
      bad("elastic.max_nodes", "must be at least nodes (" + std::to_string(s.nodes) + "), got " +
                                   std::to_string(s.max_nodes));
  }
  if (body.contains("migratable")) {
    if (!body["migratable"].is_boolean())
      bad("migratable", "expected a boolean, got " + type_name(body["migratable"]));
    s.migratable = body["migratable"].get<bool>();
  }
  if (body.contains("scaling")) {
    const json& c = body["scaling"];
    if (!c.is_array()) bad("scaling", "expected an array of {nodes, tokens_per_second}, got " + type_name(c));
    if (c.empty() || c.size() > kMaxScalingPoints)
      bad("scaling", "must list 1 to " + std::to_string(kMaxScalingPoints) + " points");
    std::vector<carbon::ScalingPoint> curve;
    for (size_t i = 0; i < c.size(); ++i) {
      const std::string f = "scaling[" + std::to_string(i) + "]";
      if (!c[i].is_object()) bad(f, "expected an object {nodes, tokens_per_second}, got " + type_name(c[i]));
      ScalingPointSpec p;
      for (const auto& [k, v] : c[i].items()) {
        if (k == "nodes") p.nodes = int(get_int(v, f + ".nodes", 1, kMaxNodes));
        else if (k == "tokens_per_second") p.tokens_per_second = get_num(v, f + ".tokens_per_second", 1e-9, 1e15);
        else throw ApiError(400, "unknown_field", "unknown field " + quote_untrusted(f + "." + k), f + "." + k);
      }
      if (p.nodes == 0) throw ApiError(400, "missing_field", f + ".nodes: required", f + ".nodes");
      if (p.tokens_per_second == 0)
        throw ApiError(400, "missing_field", f + ".tokens_per_second: required", f + ".tokens_per_second");
      s.scaling.push_back(p);
      curve.push_back({p.nodes, p.tokens_per_second});
    }
    if (auto problem = carbon::scaling_problem(curve); !problem.empty()) bad("scaling", problem);
  }
  // A change of width or region is a checkpoint and a restart from it: a
  // job that would not resume would start over at every change.
  if (s.elastic()) {
    const json& ck = s.worker.contains("checkpoint") ? s.worker["checkpoint"] : json::object();
    if (ck.is_object() && ck.contains("resume") && ck["resume"] == false)
      bad("worker.checkpoint.resume", "an elastic or migratable job must resume from its checkpoints at every change");
  }
}

}  // namespace

void check_nesting_depth(int depth, const std::vector<std::string>& path) {
  if (depth <= kMaxNestingDepth) return;
  std::string field;
  for (const auto& k : path) {
    if (field.size() + k.size() > 256) break;  // a field name, not a copy of the body
    field += (field.empty() ? "" : ".") + k;
  }
  const std::string what = "nested deeper than " + std::to_string(kMaxNestingDepth) + " levels";
  throw ApiError(400, "too_deep", (field.empty() ? "the body is " + what : field + ": " + what), field);
}

json parse_json_input(std::string_view text) {
  // The parser itself keeps its own stack (no recursion); the callback sees
  // every container as it opens, so a document too deep is refused there,
  // before the partial value or anything after it recurses over it.
  std::vector<std::string> path;  // the key of each open container ("" in an array)
  std::string key;
  auto cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    switch (ev) {
      case json::parse_event_t::key: key = parsed.get<std::string>(); break;
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        path.push_back(key);
        key.clear();
        if (depth + 1 > kMaxNestingDepth) {
          std::vector<std::string> keys;
          for (const auto& k : path)
            if (!k.empty()) keys.push_back(k);
          check_nesting_depth(depth + 1, keys);
        }
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!path.empty()) path.pop_back();
        key.clear();
        break;
      case json::parse_event_t::value:
        key.clear();
        break;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "invalid_json", "the body is not valid JSON");
  return j;
}

json parse_yaml_input(std::string_view text) {
  // YAML is Unicode text; a scalar that is not UTF-8 could not become a JSON
  // string the store and the replies can write.
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_seq(text, i);
    if (n == 0)
      throw ApiError(400, "invalid_yaml", "the body is not UTF-8 text (byte " + std::to_string(i) + ")");
    i += n;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));  // yaml-cpp's own parser stops at 2000 levels (DeepRecursion)
  } catch (const YAML::DeepRecursion&) {
    check_nesting_depth(kMaxNestingDepth + 1, {});
  } catch (const YAML::Exception& e) {
    throw ApiError(400, "invalid_yaml", "the body is not valid YAML: line " + std::to_string(e.mark.line + 1) +
                                            ", column " + std::to_string(e.mark.column + 1) + ": " +
                                            quote_untrusted(e.msg, 200));
  }
  // Walk the tree without recursion before yaml_to_json recurses over it:
  // the depth, and the nodes its aliases expand to (an alias is a shared
  // node: "billion laughs" and a self-referencing anchor both stop here).
  struct Key {
    int parent;  // index into keys, -1 = top level
    YAML::Node key;
  };
  struct Item {
    YAML::Node node;
    int depth;
    int key;  // index into keys of the object key leading here, -1 = none
  };
  std::vector<Key> keys;
  std::vector<Item> stack{{root, 0, -1}};
  size_t nodes = 0;
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    if (++nodes > kMaxBodyBytes)
      throw ApiError(400, "invalid_yaml",
                     "the body's aliases expand to more than " + std::to_string(kMaxBodyBytes) + " nodes");
    if (!it.node.IsMap() && !it.node.IsSequence()) continue;
    if (it.depth + 1 > kMaxNestingDepth) {
      std::vector<std::string> path;
      for (int k = it.key; k >= 0; k = keys[size_t(k)].parent) path.insert(path.begin(), keys[size_t(k)].key.Scalar());
      check_nesting_depth(it.depth + 1, path);
    }
    if (it.node.IsSequence()) {
      for (const auto& x : it.node) stack.push_back({x, it.depth + 1, it.key});
    } else {
      for (const auto& kv : it.node) {
        if (!kv.first.IsScalar()) throw ApiError(400, "invalid_yaml", "a key that is not a string");
        keys.push_back({it.key, kv.first});
        stack.push_back({kv.second, it.depth + 1, int(keys.size() - 1)});
      }
    }
  }
  return yaml_to_json(root);
}

std::string quote_untrusted(std::string_view s, size_t max_bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_seq(s, i);
    if (n == 1 && b >= 0x20 && b < 0x7f && b != '\\') {
      out += char(b);
    } else if (n > 1 && i + n <= max_bytes) {
      out.append(s.substr(i, n));
    } else if (n > 1) {
      break;  // a character cut by the limit
    } else {
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
      i += 1;
      continue;
    }
    i += n;
  }
  if (i < s.size()) out += "...";
  return out + "'";
}

json ApiError::to_json() const {
  return json{{"error", {{"code", code}, {"message", what()}, {"field", field}}}};
}

json JobSpec::to_json() const {
  json j{{"name", name},
         {"image", image},
         {"worker", worker},
         {"nodes", nodes},
         {"procs_per_node", procs_per_node},
         {"gpus_per_node", gpus_per_node},
         {"regions", regions},
         {"home_region", home_region},
         {"interruptible", interruptible},
         {"priority", priority},
         {"max_restarts", max_restarts},
         {"estimate", {{"duration_s", duration_s}, {"power_watts", power_watts}}}};
  if (deadline_ms > 0) j["deadline"] = format_rfc3339(deadline_ms);
  if (max_delay_s >= 0) j["max_delay_s"] = max_delay_s;
  if (checkpoint_gb > 0) j["estimate"]["checkpoint_gb"] = checkpoint_gb;
  if (min_nodes > 0 || max_nodes > 0) j["elastic"] = {{"min_nodes", min_width()}, {"max_nodes", max_width()}};
  if (migratable) j["migratable"] = true;
  if (!scaling.empty()) {
    json pts = json::array();
    for (const auto& p : scaling) pts.push_back({{"nodes", p.nodes}, {"tokens_per_second", p.tokens_per_second}});
    j["scaling"] = pts;
  }
  return j;
}

JobSpec parse_job_spec(const json& body) {
  if (!body.is_object())
    throw ApiError(400, "invalid_body", "the job spec must be a JSON object, got " +
                                            type_name(body));
  static const std::set<std::string> known = {
      "name",    "image",         "worker",        "nodes",        "procs_per_node",
      "gpus_per_node", "regions", "home_region",   "deadline",     "max_delay_s",
      "interruptible", "priority", "max_restarts", "estimate",  "elastic", "migratable", "scaling"};
  for (const auto& [k, v] : body.items())
    if (!known.count(k)) throw ApiError(400, "unknown_field", "unknown field " + quote_untrusted(k), k);

  JobSpec s;
  if (!body.contains("name")) throw ApiError(400, "missing_field", "name: required", "name");
  s.name = get_str(body["name"], "name", 40);
  if (!is_dns_label(s.name, 40))
    bad("name", "must be a DNS-1123 label (lowercase letters, digits, '-'; at most 40)");
  if (body.contains("image")) s.image = get_str(body["image"], "image", 512);
  if (!body.contains("worker"))
    throw ApiError(400, "missing_field", "worker: required (the worker's job spec)", "worker");
  if (!body["worker"].is_object()) bad("worker", "expected an object, got " + type_name(body["worker"]));
  s.worker = body["worker"];
  if (s.worker.dump().size() > kMaxWorkerPayload)
    throw ApiError(413, "payload_too_large", "worker: larger than 64 KiB", "worker");
  if (body.contains("nodes")) s.nodes = int(get_int(body["nodes"], "nodes", 1, kMaxNodes));
  if (body.contains("procs_per_node"))
    s.procs_per_node = int(get_int(body["procs_per_node"], "procs_per_node", 1, 64));
  if (body.contains("gpus_per_node"))
    s.gpus_per_node = int(get_int(body["gpus_per_node"], "gpus_per_node", 0, 16));
  // The worker puts local rank r on GPU r (worker/device.h): ranks never share one.
  if (s.gpus_per_node > 0 && s.procs_per_node > s.gpus_per_node)
    bad("procs_per_node", std::to_string(s.procs_per_node) + " ranks per node but gpus_per_node is " +
                              std::to_string(s.gpus_per_node) + ": the worker runs one rank per GPU");
  if (!body.contains("regions"))
    throw ApiError(400, "missing_field", "regions: required (allowed regions)", "regions");
  const json& r = body["regions"];
  if (!r.is_array()) bad("regions", "expected an array of region names, got " + type_name(r));
  if (r.empty() || r.size() > 64) bad("regions", "must list 1 to 64 regions");
  std::set<std::string> seen;
  for (size_t i = 0; i < r.size(); ++i) {
    std::string f = "regions[" + std::to_string(i) + "]";
    auto name = get_str(r[i], f, 64);
    if (!is_region_name(name)) bad(f, "not a region name: " + quote_untrusted(name));
    if (!seen.insert(name).second) bad(f, "duplicate region " + quote_untrusted(name));
    s.regions.push_back(name);
  }
  s.home_region = s.regions.front();
  if (body.contains("home_region")) {
    s.home_region = get_str(body["home_region"], "home_region", 64);
    if (!seen.count(s.home_region))
      bad("home_region", quote_untrusted(s.home_region) + " is not one of the allowed regions");
  }
  if (body.contains("deadline") && body.contains("max_delay_s"))
    bad("max_delay_s", "give either deadline or max_delay_s, not both");
  if (body.contains("deadline")) {
    auto t = parse_rfc3339(get_str(body["deadline"], "deadline", 64));
    if (!t) bad("deadline", "expected an RFC 3339 time such as 2026-12-02T18:00:00Z");
    if (*t <= 0) bad("deadline", "must be after 1970");
    s.deadline_ms = *t;
  }
  if (body.contains("max_delay_s"))
    s.max_delay_s = get_int(body["max_delay_s"], "max_delay_s", 0, 365LL * 86400);
  if (body.contains("interruptible")) {
    if (!body["interruptible"].is_boolean())
      bad("interruptible", "expected a boolean, got " + type_name(body["interruptible"]));
    s.interruptible = body["interruptible"].get<bool>();
  }
  if (body.contains("priority")) s.priority = int(get_int(body["priority"], "priority", -1000, 1000));
  if (body.contains("max_restarts"))
    s.max_restarts = int(get_int(body["max_restarts"], "max_restarts", 0, 100));
  if (body.contains("estimate")) {
    const json& e = body["estimate"];
    if (!e.is_object()) bad("estimate", "expected an object, got " + type_name(e));
    for (const auto& [k, v] : e.items()) {
      if (k == "duration_s")
        s.duration_s = get_num(v, "estimate.duration_s", 1, 365.0 * 86400);
      else if (k == "power_watts")
        s.power_watts = get_num(v, "estimate.power_watts", 1, 1e6);
      else if (k == "checkpoint_gb")
        s.checkpoint_gb = get_num(v, "estimate.checkpoint_gb", 0, 1e6);
      else
        throw ApiError(400, "unknown_field", "unknown field " + quote_untrusted("estimate." + k), "estimate." + k);
    }
  }
  parse_elastic(body, s);
  return s;
}

// The JSON types of the worker payload against the worker's schema: the
// worker reads its job.json as YAML, where [] and a scalar under a section
// are "unknown field" and a leaf given [] or {} is "expected a value"; here
// they are type errors naming the field, the expected and the actual type
// ("worker.model: expected an object, got an array"). Scalars are left to
// the worker's own parser (it reads "3" and 3 alike). Depth is bounded by
// kMaxNestingDepth (the body's reader).
static void check_worker_types(const json& obj, const std::string& prefix, const std::vector<greenshard::FieldDoc>& fields) {
  for (const auto& [k, v] : obj.items()) {
    const std::string path = prefix.empty() ? k : prefix + "." + k;
    const greenshard::FieldDoc* leaf = nullptr;
    bool section = false;
    for (const auto& f : fields) {
      if (f.path == path) leaf = &f;
      else if (f.path.rfind(path + ".", 0) == 0) section = true;
    }
    if (section) {
      if (!v.is_object()) bad("worker." + path, "expected an object, got " + type_name(v));
      check_worker_types(v, path, fields);
    } else if (leaf && (v.is_object() || v.is_array() || v.is_null())) {
      const std::string& t = leaf->type;
      const char* want = t == "int"    ? "an integer"
                         : t == "uint" ? "a non-negative integer"
                         : t == "number" ? "a number"
                         : t == "bool"   ? "a boolean"
                                         : "a string";
      bad("worker." + path, std::string("expected ") + want + ", got " + type_name(v));
    }
  }
}

void check_worker_spec(const json& worker) {
  if (!worker.is_object()) bad("worker", "expected an object, got " + type_name(worker));
  check_worker_types(worker, "", greenshard::config_fields());
  // The worker reads this object (its job.json) over its defaults, then the
  // GREENSHARD_* variables the executors set at launch override job_id,
  // checkpoint.dir, summary_path, metrics.port, carbon.region,
  // carbon.gco2_per_kwh, carbon.pue, status.url, status.token (and
  // carbon.intensity_url, device when configured; docs/worker-controller.md).
  // Their defaults are valid, so a spec that leaves them to the controller
  // passes, and one that sets them has them checked as written. Not checked
  // here: what needs the launch environment (the data files exist and hold
  // tokens, the device is there, the rendezvous variables); the worker checks
  // those at start, exits 2, and its message becomes the failure_reason.
  greenshard::JobConfig cfg;
  try {
    greenshard::apply_config_text(cfg, worker.dump(), "");
    greenshard::validate(cfg);
  } catch (const greenshard::ConfigError& e) {
    const std::string what = e.what();
    if (e.field.empty()) throw ApiError(400, "invalid_field", "worker: " + what, "worker");
    bool known = false;
    for (const auto& f : greenshard::config_fields())
      known = known || f.path == e.field || f.path.rfind(e.field + ".", 0) == 0;
    const std::string message = what.rfind(e.field, 0) == 0 ? "worker." + what : "worker." + e.field + ": " + what;
    throw ApiError(400, known ? "invalid_field" : "unknown_field", message, "worker." + e.field);
  } catch (const std::exception& e) {
    throw ApiError(400, "invalid_field", std::string("worker: ") + e.what(), "worker");
  }
}

JobSpec parse_job_spec_text(std::string_view text, bool yaml) {
  if (text.size() > kMaxBodyBytes)
    throw ApiError(413, "payload_too_large", "body larger than 256 KiB");
  return parse_job_spec(yaml ? parse_yaml_input(text) : parse_json_input(text));
}

std::optional<int64_t> parse_rfc3339(std::string_view s) {
  static const std::regex re(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(s.begin(), s.end(), m, re)) return std::nullopt;
  auto num = [&](int i) { return std::stoi(m[i].str()); };
  int Y = num(1), M = num(2), D = num(3), h = num(4), mi = num(5), sec = num(6);
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (D > mdays[M - 1]) return std::nullopt;
  // days from civil (Howard Hinnant's algorithm)
  int y = Y - (M <= 2);
  int era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = unsigned(y - era * 400);
  unsigned doy = (153 * (M + (M > 2 ? -3 : 9)) + 2) / 5 + D - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = int64_t(era) * 146097 + int64_t(doe) - 719468;
  int64_t ms = ((days * 24 + h) * 60 + mi) * carbon::kMinuteMs + sec * carbon::kSecondMs;
  if (m[7].matched) {
    std::string frac = m[7].str().substr(1);
    while (frac.size() < 3) frac += '0';
    ms += std::stoi(frac.substr(0, 3));
  }
  std::string tz = m[8].str();
  if (tz != "Z" && tz != "z") {
    const int64_t off = (std::stoi(tz.substr(1, 2)) * 60 + std::stoi(tz.substr(4, 2))) * carbon::kMinuteMs;
    ms -= tz[0] == '+' ? off : -off;
  }
  return ms;
}

std::string format_rfc3339(int64_t unix_ms) {
  std::time_t t = std::time_t(carbon::seconds_of_ms(unix_ms));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                carbon::millis_of_second(unix_ms));
  return buf;
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

}  // namespace controller
