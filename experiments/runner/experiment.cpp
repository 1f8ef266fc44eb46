#include "experiment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/hash.h"

namespace lazylab {
namespace {

int line_of(const YAML::Node& node) { return node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

// Error locations read "file:line: path.to.key: message".
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Error error(const YAML::Node& node, const std::string& key_path, const std::string& what) const {
    return make_error(fmt::format("{}:{}: {}: {}", path_, line_of(node), key_path, what));
  }

  Status expect_keys(const YAML::Node& map, const std::string& key_path, std::set<std::string> allowed) const {
    if (!map.IsMap()) return error(map, key_path, "expected a mapping");
    for (auto item : map) {
      auto key = item.first.as<std::string>();
      if (!allowed.count(key))
        return error(item.first, join(key_path, key),
                     fmt::format("unknown key (allowed: {})", fmt::join(allowed, ", ")));
    }
    return {};
  }

  template <class T>
  Expected<T> scalar(const YAML::Node& node, const std::string& key_path, const char* type_name) const {
    if (!node.IsScalar()) return error(node, key_path, fmt::format("expected {}", type_name));
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      return error(node, key_path, fmt::format("expected {}, got '{}'", type_name, node.Scalar()));
    }
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string path_;
};

Status read_label(const Reader& r, const YAML::Node& item, const std::string& at, std::string& label) {
  if (!item["label"]) return {};
  auto text = r.scalar<std::string>(item["label"], at + ".label", "a string");
  if (!text) return text.error();
  label = *text;
  return {};
}

Status read_workloads(const Reader& r, const YAML::Node& list, Experiment& e) {
  if (!list.IsSequence() || list.size() == 0) return r.error(list, "workloads", "expected a non-empty list");
  std::filesystem::path folder = std::filesystem::path(e.path).parent_path();
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = fmt::format("workloads[{}]", i);
    WorkloadEntry entry;
    const YAML::Node& item = list[i];
    if (item.IsScalar()) {
      entry.name = item.as<std::string>();
    } else {
      LAZYLAB_TRY(r.expect_keys(item, at, {"name", "file", "params", "label"}));
      LAZYLAB_TRY(read_label(r, item, at, entry.label));
      if (item["name"].IsDefined() == item["file"].IsDefined())
        return r.error(item, at, "give exactly one of 'name' or 'file'");
      if (item["file"]) {
        auto file = r.scalar<std::string>(item["file"], at + ".file", "a path");
        if (!file) return file.error();
        entry.name = (folder / *file).lexically_normal().string();
      } else {
        auto name = r.scalar<std::string>(item["name"], at + ".name", "a workload name");
        if (!name) return name.error();
        entry.name = *name;
      }
      if (YAML::Node params = item["params"]) {
        if (!params.IsMap()) return r.error(params, at + ".params", "expected a mapping of parameter: integer");
        for (auto param : params) {
          auto key = param.first.as<std::string>();
          auto value = r.scalar<int64_t>(param.second, at + ".params." + key, "an integer");
          if (!value) return value.error();
          entry.params[key] = *value;
        }
      }
    }
    entry.line = line_of(item);
    for (const WorkloadEntry& earlier : e.workloads)
      if (earlier.name == entry.name && earlier.params == entry.params && earlier.label == entry.label)
        return r.error(item, at,
                       fmt::format("the same workload and parameters as the entry on line {}; give one a different "
                                   "'label' or different 'params'",
                                   earlier.line));
    e.workloads.push_back(std::move(entry));
  }
  return {};
}

Status read_pipelines(const Reader& r, const YAML::Node& map, Experiment& e) {
  if (!map.IsMap() || map.size() == 0)
    return r.error(map, "pipelines", "expected a non-empty mapping of name: pipeline text");
  for (auto item : map) {
    auto name = item.first.as<std::string>();
    auto text = r.scalar<std::string>(item.second, "pipelines." + name, "pipeline text");
    if (!text) return text.error();
    e.pipelines.push_back({name, *text});
  }
  return {};
}

Status read_backends(const Reader& r, const YAML::Node& list, Experiment& e) {
  if (!list.IsSequence() || list.size() == 0) return r.error(list, "backends", "expected a non-empty list");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = fmt::format("backends[{}]", i);
    const YAML::Node& item = list[i];
    BackendEntry entry;
    if (item.IsScalar()) {
      entry.name = item.as<std::string>();
    } else {
      LAZYLAB_TRY(r.expect_keys(item, at, {"name", "options", "label"}));
      LAZYLAB_TRY(read_label(r, item, at, entry.label));
      auto name = r.scalar<std::string>(item["name"], at + ".name", "a backend name");
      if (!name) return name.error();
      entry.name = *name;
      if (item["options"]) {
        auto options = r.scalar<std::string>(item["options"], at + ".options", "'key=value,...' text");
        if (!options) return options.error();
        entry.options = *options;
      }
    }
    entry.line = line_of(item);
    for (const BackendEntry& earlier : e.backends)
      if (earlier.name == entry.name && earlier.options == entry.options && earlier.label == entry.label)
        return r.error(item, at,
                       fmt::format("the same backend and options as the entry on line {}; give one a different "
                                   "'label' or different 'options'",
                                   earlier.line));
    e.backends.push_back(std::move(entry));
  }
  return {};
}

Status read_peers(const Reader& r, const YAML::Node& map, Experiment& e) {
  if (!map.IsMap()) return r.error(map, "peers", "expected a mapping of name: [command, args...]");
  for (auto item : map) {
    std::string at = "peers." + item.first.as<std::string>();
    const YAML::Node& list = item.second;
    if (!list.IsSequence() || list.size() == 0)
      return r.error(list, at, "expected a non-empty list: [command, args...]");
    PeerEntry peer{item.first.as<std::string>(), {}};
    for (size_t i = 0; i < list.size(); ++i) {
      auto arg = r.scalar<std::string>(list[i], fmt::format("{}[{}]", at, i), "a string");
      if (!arg) return arg.error();
      peer.command.push_back(*arg);
    }
    e.peers.push_back(std::move(peer));
  }
  return {};
}

template <class T>
Status read_optional(const Reader& r, const YAML::Node& map, const std::string& at, const char* key, const char* type,
                     T& out) {
  if (!map[key]) return {};
  auto value = r.scalar<T>(map[key], Reader::join(at, key), type);
  if (!value) return value.error();
  out = *value;
  return {};
}

Status read_sections(const Reader& r, const YAML::Node& root, Experiment& e) {
  if (YAML::Node repeat = root["repeat"]) {
    LAZYLAB_TRY(r.expect_keys(repeat, "repeat", {"warmup", "runs", "interleave"}));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "warmup", "an integer", e.warmup));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "runs", "an integer", e.runs));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "interleave", "true or false", e.interleave));
    // Samples are kept per step: a count beyond this is a typo, not a plan.
    constexpr int64_t kMaxSteps = 1'000'000;
    if (e.warmup < 0 || e.runs < 1 || e.warmup > kMaxSteps || e.runs > kMaxSteps)
      return r.error(repeat, "repeat",
                     fmt::format("needs 0 <= warmup <= {0} and 1 <= runs <= {0}, got warmup {1}, runs {2}", kMaxSteps,
                                 e.warmup, e.runs));
  }
  if (YAML::Node ref = root["reference"]) {
    LAZYLAB_TRY(r.expect_keys(ref, "reference", {"backend", "pipeline", "rtol", "atol"}));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "backend", "a backend name", e.reference.backend));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "pipeline", "pipeline text", e.reference.pipeline));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "rtol", "a number", e.reference.rtol));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "atol", "a number", e.reference.atol));
    // A NaN tolerance would make every comparison pass.
    for (auto [key, value] : {std::pair{"rtol", e.reference.rtol}, std::pair{"atol", e.reference.atol}})
      if (!(value >= 0) || std::isinf(value))
        return r.error(ref[key] ? ref[key] : ref, std::string("reference.") + key,
                       fmt::format("must be a finite number >= 0, got {}", value));
  }
  if (YAML::Node report = root["report"]) {
    LAZYLAB_TRY(r.expect_keys(report, "report", {"json", "markdown"}));
    LAZYLAB_TRY(read_optional(r, report, "report", "json", "a path", e.report.json));
    LAZYLAB_TRY(read_optional(r, report, "report", "markdown", "a path", e.report.markdown));
  }
  if (YAML::Node limits = root["limits"]) {
    LAZYLAB_TRY(r.expect_keys(limits, "limits", {"buffer-bytes", "arena-bytes"}));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "buffer-bytes", "a byte count", e.limits.buffer_bytes));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "arena-bytes", "a byte count", e.limits.arena_bytes));
  }
  if (YAML::Node cache = root["cache"]) {
    LAZYLAB_TRY(r.expect_keys(cache, "cache", {"capacity", "verify-hits"}));
    LAZYLAB_TRY(read_optional(r, cache, "cache", "capacity", "an integer", e.cache_capacity));
    LAZYLAB_TRY(read_optional(r, cache, "cache", "verify-hits", "true or false", e.verify_cache_hits));
  }
  return {};
}

Status read_experiment(const Reader& r, const YAML::Node& root, Experiment& e) {
  LAZYLAB_TRY(r.expect_keys(root, "",
                            {"name", "description", "seed", "workloads", "pipelines", "baseline", "backends", "repeat",
                             "reference", "report", "cache", "peers", "openblas-core", "limits"}));
  for (const char* required : {"name", "workloads", "pipelines", "backends"})
    if (!root[required]) return r.error(root, required, "missing required key");
  LAZYLAB_TRY(read_optional(r, root, "", "name", "a string", e.name));
  LAZYLAB_TRY(read_optional(r, root, "", "description", "a string", e.description));
  LAZYLAB_TRY(read_optional(r, root, "", "seed", "an integer", e.seed));
  LAZYLAB_TRY(read_workloads(r, root["workloads"], e));
  LAZYLAB_TRY(read_pipelines(r, root["pipelines"], e));
  LAZYLAB_TRY(read_backends(r, root["backends"], e));
  if (root["peers"]) LAZYLAB_TRY(read_peers(r, root["peers"], e));
  LAZYLAB_TRY(read_optional(r, root, "", "openblas-core", "'auto' or an OpenBLAS core name", e.openblas_core));
  e.baseline = e.pipelines.front().name;
  LAZYLAB_TRY(read_optional(r, root, "", "baseline", "a pipeline name", e.baseline));
  bool known =
      std::any_of(e.pipelines.begin(), e.pipelines.end(), [&](const PipelineEntry& p) { return p.name == e.baseline; });
  if (!known) return r.error(root["baseline"], "baseline", fmt::format("'{}' is not one of the pipelines", e.baseline));
  return read_sections(r, root, e);
}

}  // namespace

Expected<Experiment> parse_experiment(const std::string& text, const std::string& path) {
  Experiment e;
  e.path = path;
  e.hash = hash_bytes(text.data(), text.size());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& ex) {
    return make_error(fmt::format("{}:{}:{}: malformed YAML: {}", path, ex.mark.line + 1, ex.mark.column + 1, ex.msg));
  }
  Status status = read_experiment(Reader(path), root, e);
  if (!status) return status.error();
  return e;
}

Expected<Experiment> load_experiment(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("{}: cannot open experiment file", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_experiment(text.str(), path);
}

}  // namespace lazylab
