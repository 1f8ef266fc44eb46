#include "experiment.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>

#include "core/hash.h"
#include "core/source_file.h"
#include "core/suggest.h"
#include "pipeline_sweep.h"
#include "training_step.h"

namespace lazylab {
namespace {

// A key that is not there has no line: yaml-cpp throws on asking.
int line_of(const YAML::Node& node) { return node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0; }

// Error locations read "file:line: path.to.key: message".
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  Error error(const YAML::Node& node, const std::string& key_path, const std::string& what) const {
    if (key_path.empty()) return make_error(fmt::format("{}:{}: the experiment: {}", path_, line_of(node), what));
    return make_error(fmt::format("{}:{}: {}: {}", path_, line_of(node), key_path, what));
  }

  Status expect_keys(const YAML::Node& map, const std::string& key_path, std::set<std::string> allowed) const {
    if (!map.IsMap()) return error(map, key_path, "expected a mapping");
    for (auto item : map) {
      auto key = item.first.as<std::string>();
      if (!allowed.count(key))
        return error(item.first, join(key_path, key),
                     fmt::format("unknown key{} (allowed: {})",
                                 did_you_mean(key, std::vector<std::string>(allowed.begin(), allowed.end())),
                                 fmt::join(allowed, ", ")));
    }
    return {};
  }

  template <class T>
  Expected<T> scalar(const YAML::Node& node, const std::string& key_path, const char* type_name) const {
    if (!node.IsDefined()) return make_error(fmt::format("{}: {}: missing (expected {})", path_, key_path, type_name));
    if (!node.IsScalar()) return error(node, key_path, fmt::format("expected {}", type_name));
    if constexpr (std::is_unsigned_v<T> && !std::is_same_v<T, bool>)
      if (node.Scalar().starts_with("-"))
        return error(node, key_path, fmt::format("expected {} (not negative), got '{}'", type_name, node.Scalar()));
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

// `{rows: [8, 64], cols: 32}`: every combination of the listed values, in
// the order the keys are written (the last key varies fastest).
Expected<std::vector<WorkloadParams>> read_param_grid(const Reader& r, const YAML::Node& params,
                                                      const std::string& at) {
  if (!params.IsMap())
    return r.error(params, at, "expected a mapping of parameter: integer (or a list of integers, for a sweep)");
  std::vector<WorkloadParams> grid = {{}};
  for (auto param : params) {
    auto key = param.first.as<std::string>();
    std::vector<int64_t> values;
    if (param.second.IsSequence()) {
      if (param.second.size() == 0) return r.error(param.second, at + "." + key, "an empty list sweeps nothing");
      for (size_t i = 0; i < param.second.size(); ++i) {
        auto value = r.scalar<int64_t>(param.second[i], fmt::format("{}.{}[{}]", at, key, i), "an integer");
        if (!value) return value.error();
        values.push_back(*value);
      }
    } else {
      auto value = r.scalar<int64_t>(param.second, at + "." + key, "an integer or a list of integers");
      if (!value) return value.error();
      values.push_back(*value);
    }
    if (grid.size() * values.size() > static_cast<size_t>(kMaxSweepEntries))
      return r.error(params, at, fmt::format("the sweep expands to more than {} workloads", kMaxSweepEntries));
    std::vector<WorkloadParams> next;
    for (const WorkloadParams& partial : grid)
      for (int64_t value : values) {
        next.push_back(partial);
        next.back()[key] = value;
      }
    grid = std::move(next);
  }
  return grid;
}

// `train: {loss: L, optimizer: O}` (each optional: mse, adamw), the names
// from training_step.h's lists.
Status read_training(const Reader& r, const YAML::Node& item, const std::string& at, WorkloadEntry& entry) {
  const YAML::Node& train = item["train"];
  const std::string where = at + ".train";
  if (item["torch"]) return r.error(train, where, "a PyTorch program ('torch') is a training step already");
  if (!train.IsMap())
    return r.error(train, where, "expected a mapping: {loss: cross-entropy|mse, optimizer: sgd|adamw}");
  LAZYLAB_TRY(r.expect_keys(train, where, {"loss", "optimizer"}));
  TrainingSpec defaults;
  auto choose = [&](const char* key, std::span<const std::string_view> choices, std::string fallback,
                    std::string& chosen) -> Status {
    chosen = std::move(fallback);
    if (!train[key]) return {};
    auto value = r.scalar<std::string>(train[key], where + "." + key, "a name");
    if (!value) return value.error();
    if (std::find(choices.begin(), choices.end(), *value) == choices.end())
      return r.error(train[key], where + "." + key,
                     fmt::format("'{}': expected one of {}", *value, fmt::join(choices, ", ")));
    chosen = *value;
    return {};
  };
  LAZYLAB_TRY(choose("loss", kTrainingLosses, defaults.loss, entry.train_loss));
  return choose("optimizer", kTrainingOptimizers, defaults.optimizer, entry.train_optimizer);
}

Status read_workloads(const Reader& r, const YAML::Node& list, Experiment& e) {
  if (!list.IsSequence() || list.size() == 0) return r.error(list, "workloads", "expected a non-empty list");
  std::filesystem::path folder = std::filesystem::path(e.path).parent_path();
  // (name, params, label, capture, inputs, training) -> line: the same entry twice is a mistake.
  std::map<std::tuple<std::string, WorkloadParams, std::string, std::string, std::string, std::string>, int> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = fmt::format("workloads[{}]", i);
    WorkloadEntry entry;
    const YAML::Node& item = list[i];
    if (item.IsScalar()) {
      entry.name = item.as<std::string>();
    } else {
      LAZYLAB_TRY(r.expect_keys(
          item, at, {"name", "file", "onnx", "torch", "params", "label", "weights", "capture", "inputs", "train"}));
      LAZYLAB_TRY(read_label(r, item, at, entry.label));
      int given =
          item["name"].IsDefined() + item["file"].IsDefined() + item["onnx"].IsDefined() + item["torch"].IsDefined();
      if (given != 1) return r.error(item, at, "give exactly one of 'name', 'file', 'onnx' or 'torch'");
      if (item["weights"] && !item["file"])
        return r.error(item["weights"], at + ".weights", "binds the parameters of a .lzir 'file' only");
      if (item["capture"] && !item["torch"])
        return r.error(item["capture"], at + ".capture", "says how a PyTorch program ('torch') is captured only");
      if (item["inputs"]) {
        if (item["torch"])
          return r.error(item["inputs"], at + ".inputs", "stores a workload's inputs; a PyTorch program makes its own");
        auto dtype = r.scalar<std::string>(item["inputs"], at + ".inputs", "a 16-bit float dtype (bf16, f16)");
        if (!dtype) return dtype.error();
        std::optional<DType> stored = parse_dtype(*dtype);
        if (!stored || !is_float(*stored) || dtype_size(*stored) != 2)  // the table's 16-bit floats
          return r.error(item["inputs"], at + ".inputs",
                         fmt::format("'{}': the f32 inputs are stored in bf16 or f16", *dtype));
        entry.inputs = *dtype;
      }
      if (item["train"]) LAZYLAB_TRY(read_training(r, item, at, entry));
      if (item["onnx"]) {
        auto file = r.scalar<std::string>(item["onnx"], at + ".onnx", "a path to an .onnx model");
        if (!file) return file.error();
        if (!file->ends_with(".onnx")) return r.error(item["onnx"], at + ".onnx", "expected a path ending in .onnx");
        entry.name = (folder / *file).lexically_normal().string();
      } else if (item["torch"]) {
        auto file = r.scalar<std::string>(item["torch"], at + ".torch", "a path to a PyTorch training program (.py)");
        if (!file) return file.error();
        if (!file->ends_with(".py")) return r.error(item["torch"], at + ".torch", "expected a path ending in .py");
        entry.name = (folder / *file).lexically_normal().string();
        if (item["capture"]) {
          // The exporter knows the capture styles (lazylab.torch.export) and
          // names them when it is given one it does not know.
          auto capture = r.scalar<std::string>(item["capture"], at + ".capture", "a capture style (lazy, fx, dynamo)");
          if (!capture) return capture.error();
          entry.capture = *capture;
        }
      } else if (item["file"]) {
        auto file = r.scalar<std::string>(item["file"], at + ".file", "a path");
        if (!file) return file.error();
        entry.name = (folder / *file).lexically_normal().string();
        if (item["weights"]) {
          auto weights = r.scalar<std::string>(item["weights"], at + ".weights", "a folder of .npy files");
          if (!weights) return weights.error();
          entry.weights = (folder / *weights).lexically_normal().string();
        }
      } else {
        auto name = r.scalar<std::string>(item["name"], at + ".name", "a workload name");
        if (!name) return name.error();
        entry.name = *name;
      }
    }
    entry.line = line_of(item);
    std::vector<WorkloadParams> grid = {{}};
    if (item.IsMap() && item["params"]) {
      auto expanded = read_param_grid(r, item["params"], at + ".params");
      if (!expanded) return expanded.error();
      grid = std::move(*expanded);
    }
    for (WorkloadParams& params : grid) {
      entry.params = std::move(params);
      auto [earlier, inserted] = seen.emplace(
          std::tuple(entry.name, entry.params, entry.label, entry.capture, entry.inputs, training_of(entry)),
          entry.line);
      if (!inserted)
        return r.error(item, at,
                       fmt::format("the same workload and parameters ({}) as the entry on line {}; give one a "
                                   "different 'label', 'params' or 'inputs'",
                                   describe_params(entry.params), earlier->second));
      if (e.workloads.size() == static_cast<size_t>(kMaxSweepEntries))
        return r.error(item, at, fmt::format("more than {} workloads in all", kMaxSweepEntries));
      e.workloads.push_back(entry);
    }
  }
  return {};
}

Status read_pipelines(const Reader& r, const YAML::Node& map, Experiment& e) {
  if (!map.IsMap() || map.size() == 0)
    return r.error(map, "pipelines", "expected a non-empty mapping of name: pipeline text");
  std::map<std::string, int> seen;  // name -> line
  for (auto item : map) {
    auto name = item.first.as<std::string>();
    auto text = r.scalar<std::string>(item.second, "pipelines." + name, "pipeline text");
    if (!text) return text.error();
    auto sweep = expand_pipeline_sweep(name, *text);
    if (!sweep) return r.error(item.second, "pipelines." + name, sweep.error().message);
    for (ExpandedPipeline& expanded : *sweep) {
      PipelineEntry entry{std::move(expanded.name), std::move(expanded.text), line_of(item.second)};
      auto [earlier, inserted] = seen.emplace(entry.name, entry.line);
      if (!inserted)
        return r.error(item.first, "pipelines." + name,
                       fmt::format("pipeline '{}' is already defined on line {}", entry.name, earlier->second));
      if (e.pipelines.size() == static_cast<size_t>(kMaxSweepEntries))
        return r.error(item.first, "pipelines." + name, fmt::format("more than {} pipelines in all", kMaxSweepEntries));
      e.pipelines.push_back(std::move(entry));
    }
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
      if (!item["name"]) return r.error(item, at, "missing 'name' (a backend name or a plugin file)");
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

Status read_plugins(const Reader& r, const YAML::Node& list, Experiment& e) {
  if (!list.IsSequence()) return r.error(list, "plugins", "expected a list of plugin (.so) paths");
  std::filesystem::path folder = std::filesystem::path(e.path).parent_path();
  for (size_t i = 0; i < list.size(); ++i) {
    auto path = r.scalar<std::string>(list[i], fmt::format("plugins[{}]", i), "a path");
    if (!path) return path.error();
    e.plugins.push_back({(folder / *path).lexically_normal().string(), line_of(list[i])});
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

Status read_prepare(const Reader& r, const YAML::Node& list, Experiment& e) {
  if (!list.IsSequence() || list.size() == 0)
    return r.error(list, "prepare", "expected a non-empty list: [command, args...]");
  for (size_t i = 0; i < list.size(); ++i) {
    auto arg = r.scalar<std::string>(list[i], fmt::format("prepare[{}]", i), "a string");
    if (!arg) return arg.error();
    e.prepare.push_back(*arg);
  }
  e.prepare_line = line_of(list);
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
    LAZYLAB_TRY(r.expect_keys(repeat, "repeat", {"warmup", "runs", "interleave", "profile", "flush"}));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "flush", "a size in MiB", e.flush_bytes));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "warmup", "an integer", e.warmup));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "runs", "an integer", e.runs));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "interleave", "true or false", e.interleave));
    LAZYLAB_TRY(read_optional(r, repeat, "repeat", "profile", "an integer", e.profile_steps));
    // Samples are kept per step: a count beyond this is a typo, not a plan.
    constexpr int64_t kMaxSteps = 1'000'000;
    constexpr int64_t kMaxFlushMiB = 16384;
    if (e.flush_bytes < 0 || e.flush_bytes > kMaxFlushMiB)
      return r.error(repeat["flush"], "repeat.flush",
                     fmt::format("must be between 0 and {} MiB, got {}", kMaxFlushMiB, e.flush_bytes));
    e.flush_bytes <<= 20;
    if (e.warmup < 0 || e.runs < 1 || e.profile_steps < 0 || e.warmup > kMaxSteps || e.runs > kMaxSteps ||
        e.profile_steps > kMaxSteps)
      return r.error(repeat, "repeat",
                     fmt::format("needs 0 <= warmup <= {0}, 1 <= runs <= {0} and 0 <= profile <= {0}, got warmup {1}, "
                                 "runs {2}, profile {3}",
                                 kMaxSteps, e.warmup, e.runs, e.profile_steps));
  }
  // After repeat: a round is at least one of its runs.
  LAZYLAB_TRY(read_optional(r, root, "", "peer-rounds", "an integer", e.peer_rounds));
  if (e.peer_rounds < 0 || e.peer_rounds > e.runs)
    return r.error(root["peer-rounds"], "peer-rounds",
                   fmt::format("must be between 0 and repeat.runs ({}), got {}", e.runs, e.peer_rounds));
  if (YAML::Node ref = root["reference"]) {
    LAZYLAB_TRY(r.expect_keys(ref, "reference", {"backend", "pipeline", "rtol", "atol", "relative_to"}));
    e.reference.line = line_of(ref);
    LAZYLAB_TRY(read_optional(r, ref, "reference", "backend", "a backend name", e.reference.backend));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "pipeline", "pipeline text", e.reference.pipeline));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "rtol", "a number", e.reference.rtol));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "atol", "a number", e.reference.atol));
    LAZYLAB_TRY(read_optional(r, ref, "reference", "relative_to", "element or output", e.reference.relative_to));
    if (e.reference.relative_to != "element" && e.reference.relative_to != "output")
      return r.error(ref["relative_to"], "reference.relative_to",
                     fmt::format("must be element or output, got '{}'", e.reference.relative_to));
    // A NaN tolerance would make every comparison pass.
    for (auto [key, value] : {std::pair{"rtol", e.reference.rtol}, std::pair{"atol", e.reference.atol}})
      if (!(value >= 0) || std::isinf(value))
        return r.error(ref[key] ? ref[key] : ref, std::string("reference.") + key,
                       fmt::format("must be a finite number >= 0, got {}", value));
  }
  if (YAML::Node report = root["report"]) {
    LAZYLAB_TRY(r.expect_keys(report, "report", {"json", "markdown", "csv", "html"}));
    LAZYLAB_TRY(read_optional(r, report, "report", "json", "a path", e.report.json));
    LAZYLAB_TRY(read_optional(r, report, "report", "markdown", "a path", e.report.markdown));
    LAZYLAB_TRY(read_optional(r, report, "report", "csv", "a path", e.report.csv));
    LAZYLAB_TRY(read_optional(r, report, "report", "html", "a path", e.report.html));
  }
  if (YAML::Node limits = root["limits"]) {
    LAZYLAB_TRY(r.expect_keys(limits, "limits", {"buffer-bytes", "arena-bytes", "memory-bytes", "trace-nodes"}));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "buffer-bytes", "a byte count", e.limits.buffer_bytes));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "arena-bytes", "a byte count", e.limits.arena_bytes));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "memory-bytes", "a byte count", e.limits.memory_bytes));
    LAZYLAB_TRY(read_optional(r, limits, "limits", "trace-nodes", "a node count", e.limits.trace_nodes));
  }
  if (YAML::Node cache = root["cache"]) {
    LAZYLAB_TRY(r.expect_keys(cache, "cache", {"capacity", "verify-hits"}));
    LAZYLAB_TRY(read_optional(r, cache, "cache", "capacity", "an integer", e.cache_capacity));
    LAZYLAB_TRY(read_optional(r, cache, "cache", "verify-hits", "true or false", e.verify_cache_hits));
  }
  return {};
}

Status read_experiment(const Reader& r, const YAML::Node& root, Experiment& e) {
  if (root.IsMap() && root["openblas-core"])  // moved in 0.7: the cpu backend declares it
    return r.error(root["openblas-core"], "openblas-core",
                   "is an option of the cpu backend now: backends: [{name: cpu, options: openblas-core=auto}] "
                   "(`lazylab backends` lists it)");
  LAZYLAB_TRY(r.expect_keys(
      root, "",
      {"name", "description", "seed", "workloads", "pipelines", "baseline", "backends", "repeat", "reference", "report",
       "cache", "peers", "peer-timeout", "peer-rounds", "limits", "plugins", "prepare"}));
  for (const char* required : {"name", "workloads", "pipelines", "backends"})
    if (!root[required]) return r.error(root, required, "missing required key");
  LAZYLAB_TRY(read_optional(r, root, "", "name", "a string", e.name));
  LAZYLAB_TRY(read_optional(r, root, "", "description", "a string", e.description));
  LAZYLAB_TRY(read_optional(r, root, "", "seed", "an integer", e.seed));
  LAZYLAB_TRY(read_workloads(r, root["workloads"], e));
  LAZYLAB_TRY(read_pipelines(r, root["pipelines"], e));
  LAZYLAB_TRY(read_backends(r, root["backends"], e));
  if (root["peers"]) LAZYLAB_TRY(read_peers(r, root["peers"], e));
  if (root["prepare"]) LAZYLAB_TRY(read_prepare(r, root["prepare"], e));
  if (root["plugins"]) LAZYLAB_TRY(read_plugins(r, root["plugins"], e));
  LAZYLAB_TRY(read_optional(r, root, "", "peer-timeout", "a number of seconds", e.peer_timeout_s));
  if (!(e.peer_timeout_s > 0) || std::isinf(e.peer_timeout_s))
    return r.error(root["peer-timeout"], "peer-timeout",
                   fmt::format("must be a finite number of seconds > 0, got {}", e.peer_timeout_s));
  e.baseline = e.pipelines.front().name;
  LAZYLAB_TRY(read_optional(r, root, "", "baseline", "a pipeline name", e.baseline));
  std::vector<std::string> names;
  for (const PipelineEntry& p : e.pipelines) names.push_back(p.name);
  if (std::find(names.begin(), names.end(), e.baseline) == names.end())
    return r.error(root["baseline"], "baseline",
                   fmt::format("'{}' is not one of the pipelines{} (pipelines: {})", e.baseline,
                               did_you_mean(e.baseline, names), fmt::join(names, ", ")));
  return read_sections(r, root, e);
}

// Every key is a plain name, once: yaml-cpp keeps one of two equal keys
// silently (a user meant one of them), and a list, a mapping or nothing as a
// key names nothing the loader could read.
Status check_keys(const Reader& r, const YAML::Node& node, const std::string& at) {
  if (node.IsSequence())
    for (size_t i = 0; i < node.size(); ++i) LAZYLAB_TRY(check_keys(r, node[i], fmt::format("{}[{}]", at, i)));
  if (!node.IsMap()) return {};
  std::map<std::string, int> seen;
  for (auto item : node) {
    if (!item.first.IsScalar())
      return r.error(item.first, at.empty() ? "(top level)" : at,
                     "a key must be a plain name, not a list, a mapping or nothing");
    std::string key = item.first.Scalar();
    auto [it, inserted] = seen.emplace(key, line_of(item.first));
    if (!inserted)
      return r.error(item.first, Reader::join(at, key), fmt::format("duplicate key (first on line {})", it->second));
    LAZYLAB_TRY(check_keys(r, item.second, Reader::join(at, key)));
  }
  return {};
}

// Sets `o.key` in the tree, creating maps on the way; list items must exist.
Status apply_override(YAML::Node& root, const KeyOverride& o) {
  static const std::regex kPart(R"(([^.\[\]]+)|\[(\d+)\])");
  YAML::Node value;
  try {
    value = YAML::Load(o.value);
  } catch (const YAML::ParserException& ex) {
    return make_error(fmt::format("--set {}: malformed YAML value '{}': {}", o.key, o.value, ex.msg));
  }
  std::vector<std::string> parts;
  std::vector<bool> is_index;
  for (auto it = std::sregex_iterator(o.key.begin(), o.key.end(), kPart); it != std::sregex_iterator(); ++it) {
    is_index.push_back((*it)[2].matched);
    parts.push_back(is_index.back() ? (*it)[2].str() : (*it)[1].str());
  }
  if (parts.empty()) return make_error(fmt::format("--set '{}': empty key", o.key));
  YAML::Node node = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    if (is_index[i]) {
      size_t index = std::stoul(parts[i]);
      if (!node.IsSequence() || index >= node.size())
        return make_error(fmt::format("--set {}: no list item [{}] there", o.key, index));
      if (last)
        node[index] = value;
      else
        node.reset(node[index]);
    } else {
      if (!node.IsMap() && !node.IsNull())
        return make_error(fmt::format("--set {}: '{}' is not in a mapping", o.key, parts[i]));
      if (last) {
        node[parts[i]] = value;
      } else {
        if (!node[parts[i]]) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
        node.reset(node[parts[i]]);
      }
    }
  }
  return {};
}

}  // namespace

Expected<KeyOverride> parse_key_override(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return make_error(fmt::format("--set '{}': expected KEY=VALUE (e.g. repeat.runs=3)", text));
  return KeyOverride{text.substr(0, eq), text.substr(eq + 1)};
}

Expected<Experiment> parse_experiment(const std::string& text, const std::string& path,
                                      const std::vector<KeyOverride>& overrides) {
  Experiment e;
  e.path = path;
  std::string hashed = text;
  for (const KeyOverride& o : overrides) hashed += fmt::format("\n# --set {}={}", o.key, o.value);
  e.hash = hash_bytes(hashed.data(), hashed.size());
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& ex) {
    return make_error(fmt::format("{}:{}:{}: malformed YAML: {}", path, ex.mark.line + 1, ex.mark.column + 1, ex.msg));
  }
  Reader reader(path);
  LAZYLAB_TRY(check_keys(reader, root, ""));
  for (const KeyOverride& o : overrides) LAZYLAB_TRY(apply_override(root, o));
  if (!overrides.empty()) LAZYLAB_TRY(check_keys(reader, root, ""));
  Status status = read_experiment(reader, root, e);
  if (!status) return status.error();
  e.overrides = overrides;
  return e;
}

Expected<Experiment> load_experiment(const std::string& path, const std::vector<KeyOverride>& overrides) {
  auto text = read_source_file(path, "an experiment file");
  if (!text) return text.error();
  return parse_experiment(*text, path, overrides);
}

Error experiment_error(const Experiment& e, int line, const std::string& key, const std::string& message) {
  return make_error(fmt::format("{}:{}: {}: {}", e.path, line, key, message));
}

}  // namespace lazylab
