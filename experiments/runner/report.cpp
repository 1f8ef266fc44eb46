#include "report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/pass_plugin.h"
#include "core/version.h"
#include "report_tables.h"
#include "results_json.h"

namespace lazylab {
namespace {

std::string first_line_with(const char* file, const std::string& prefix) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) {
      size_t colon = line.find(':');
      std::string value = colon == std::string::npos ? line : line.substr(colon + 1);
      return value.substr(value.find_first_not_of(" \t"));
    }
  return "unknown";
}

// Text a user gave (a name, a path) need not be UTF-8; JSON must be, so
// invalid bytes become U+FFFD instead of an exception after every cell ran.
std::string json_text(const nlohmann::json& json, int indent) {
  return json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

nlohmann::json captures_json(const ExperimentResult& result) {
  nlohmann::json captures = nlohmann::json::array();
  for (const CaptureResult& c : result.captures) {
    nlohmann::json capture = capture_to_json(c.capture);
    capture["workload_entry"] = c.workload_entry;
    captures.push_back(std::move(capture));
  }
  return captures;
}

nlohmann::json peers_json(const ExperimentResult& result) {
  nlohmann::json peers = nlohmann::json::array();
  for (const PeerResult& peer : result.peers) {
    nlohmann::json cells = nlohmann::json::array();
    for (const PeerComparison& row : peer_comparisons(result)) {
      if (row.peer != &peer) continue;
      nlohmann::json cell = {
          {"workload", row.peer_cell->workload},
          {"step_ms",
           {{"median", row.peer_cell->median_ms}, {"min", row.peer_cell->min_ms}, {"max", row.peer_cell->max_ms}}}};
      if (!row.peer_cell->round_ms.empty()) cell["rounds_ms"] = row.peer_cell->round_ms;
      if (!row.peer_cell->inputs.empty()) cell["inputs"] = row.peer_cell->inputs;
      if (!row.peer_cell->train.empty()) cell["train"] = row.peer_cell->train;
      if (row.best)
        cell["best_lazylab"] = {{"pipeline", row.best->pipeline},
                                {"backend", row.best->backend},
                                {"backend_options", row.best->backend_options},
                                {"step_ms", row.lazylab_ms},
                                {"timed_on_device", row.lazylab_on_device},
                                {"peer_over_lazylab", row.ratio()}};
      if (row.best && !row.round_ratios.empty()) cell["best_lazylab"]["round_ratios"] = row.round_ratios;
      cells.push_back(std::move(cell));
    }
    peers.push_back({{"name", peer.name},
                     {"command", peer.command},
                     {"description", peer.description},
                     {"clock", clock_name(peer.clock)},
                     {"error", peer.error},
                     {"stderr", peer.stderr_text},
                     {"cells", std::move(cells)}});
  }
  return peers;
}

}  // namespace

Status write_file_atomically(const std::string& path_text, const std::string& text) {
  std::filesystem::path path = path_text;
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::filesystem::path temporary = path;
  temporary += ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out.flush()) return make_error(fmt::format("{}: cannot write", temporary.string()));
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) return make_error(fmt::format("{}: cannot rename into place: {}", path.string(), ec.message()));
  return {};
}

std::vector<std::string> plugin_descriptions() {
  std::vector<std::string> descriptions;
  for (const LoadedPlugin& plugin : loaded_pass_plugins())
    descriptions.push_back(fmt::format("{} {} ({})", plugin.name, plugin.version, plugin.path));
  return descriptions;
}

RunInfo collect_run_info(const std::vector<std::string>& backend_devices) {
  RunInfo info;
  info.started_at = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                                fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  utsname names{};
  uname(&names);
  info.machine = fmt::format("{}, {} hardware threads, {} memory, {} {} {}",
                             first_line_with("/proc/cpuinfo", "model name"), std::thread::hardware_concurrency(),
                             first_line_with("/proc/meminfo", "MemTotal"), names.sysname, names.release, names.machine);
  info.build = build_description();
  info.backend_devices = backend_devices;
  info.plugins = plugin_descriptions();
  return info;
}

namespace {

nlohmann::json overrides_json(const Experiment& e) {
  nlohmann::json list = nlohmann::json::array();
  for (const KeyOverride& o : e.overrides) list.push_back(o.key + "=" + o.value);
  return list;
}

// The experiment's entries, so a report renders without its YAML file.
nlohmann::json entries_json(const Experiment& e) {
  nlohmann::json workloads = nlohmann::json::array(), pipelines = nlohmann::json::array(),
                 backends = nlohmann::json::array();
  for (const WorkloadEntry& w : e.workloads)
    workloads.push_back({{"name", w.name},
                         {"params", w.params},
                         {"label", w.label},
                         {"weights", w.weights},
                         {"capture", w.capture},
                         {"inputs", w.inputs},
                         {"train_loss", w.train_loss},
                         {"train_optimizer", w.train_optimizer}});
  for (const PipelineEntry& p : e.pipelines) pipelines.push_back({{"name", p.name}, {"text", p.text}});
  for (const BackendEntry& b : e.backends)
    backends.push_back({{"name", b.name}, {"options", b.options}, {"label", b.label}});
  return {{"workloads", workloads}, {"pipelines", pipelines}, {"backends", backends}};
}

void read_entries(const nlohmann::json& experiment, Experiment& e) {
  for (const nlohmann::json& w : experiment.value("workloads", nlohmann::json::array()))
    e.workloads.push_back({w.value("name", ""), w.value("params", WorkloadParams{}), w.value("label", ""),
                           w.value("weights", ""), w.value("capture", ""), w.value("inputs", ""),
                           w.value("train_loss", ""), w.value("train_optimizer", ""), 0});
  for (const nlohmann::json& p : experiment.value("pipelines", nlohmann::json::array()))
    e.pipelines.push_back({p.value("name", ""), p.value("text", ""), 0});
  for (const nlohmann::json& b : experiment.value("backends", nlohmann::json::array()))
    e.backends.push_back({b.value("name", ""), b.value("options", ""), b.value("label", ""), 0});
}

}  // namespace

nlohmann::json report_json(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  nlohmann::json cells = nlohmann::json::array();
  for (const CellResult& c : result.cells) cells.push_back(cell_to_json(c));
  return {{"schema_version", kReportSchemaVersion},
          {"experiment",
           {{"name", e.name},
            {"description", e.description},
            {"path", e.path},
            {"hash", fmt::format("{:016x}", e.hash)},
            {"seed", e.seed},
            {"baseline", e.baseline},
            {"warmup", e.warmup},
            {"runs", e.runs},
            {"profile_steps", e.profile_steps},
            {"interleave", e.interleave},
            {"peer_rounds", e.peer_rounds},
            {"flush_bytes", e.flush_bytes},
            {"overrides", overrides_json(e)},
            {"shard", result.shard},
            {"isolate", result.isolated},
            {"reference",
             {{"backend", e.reference.backend},
              {"pipeline", e.reference.pipeline},
              {"rtol", e.reference.rtol},
              {"atol", e.reference.atol},
              {"relative_to", e.reference.relative_to}}},
            {"entries", entries_json(e)}}},
          {"started_at", info.started_at},
          {"ceilings", ceilings_to_json(result.ceilings)},
          {"device_ceilings", device_ceilings_to_json(result)},
          {"machine", info.machine},
          {"build", info.build},
          {"backend_devices", info.backend_devices},
          {"merged_from", info.merged_from},
          {"plugins", info.plugins},
          {"all_correct", result.all_correct()},
          {"cell_counts",
           {{"total", result.cells.size()},
            {"ok", result.cells_with(CellStatus::Ok)},
            {"mismatch", result.cells_with(CellStatus::Mismatch)},
            {"failed", result.cells_with(CellStatus::Failed)},
            {"crashed", result.cells_with(CellStatus::Crashed)},
            {"noisy",
             std::count_if(result.cells.begin(), result.cells.end(), [](const CellResult& c) { return c.noisy; })}}},
          {"cells", cells},
          {"peers", peers_json(result)},
          {"captures", captures_json(result)}};
}

namespace {

// "quickstart" -> "quickstart"; "my run: 2" -> "my-run--2": a file name on
// any system.
std::string file_stem(const std::string& name) {
  std::string stem;
  for (char c : name) stem += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '-';
  return stem.empty() ? "experiment" : stem;
}

// Without a `report:` key every format goes to one folder: -o DIR, or
// lazylab-reports/NAME-TIME.
ReportPaths default_paths(const Experiment& e, const std::string& output_dir) {
  namespace fs = std::filesystem;
  std::string stem = file_stem(e.name);
  fs::path folder = output_dir;
  if (folder.empty()) {
    auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    folder = fs::path("lazylab-reports") / fmt::format("{}-{:%Y%m%d-%H%M%S}", stem, fmt::gmtime(now));
  }
  auto file = [&](const char* extension) { return (folder / (stem + extension)).string(); };
  return {file(".json"), file(".md"), file(".csv"), file(".html"), ""};
}

// Checked before hours of cells: the path is not a folder, and the nearest
// folder on its way that exists takes new files (a probe file proves it).
// Folders are created only when the reports are written.
Status check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return make_error(fmt::format("report path '{}' is a folder", path));
  fs::path folder = fs::path(path).parent_path();
  while (!folder.empty() && !fs::exists(folder, ec)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  fs::path probe = folder / fmt::format(".lazylab-probe-{}", ::getpid());
  if (!fs::is_directory(folder, ec) || !std::ofstream(probe))
    return make_error(fmt::format("cannot write reports into '{}'", folder.string()));
  fs::remove(probe, ec);
  return {};
}

}  // namespace

Expected<ReportPaths> plan_reports(const Experiment& e, const std::string& output_dir) {
  namespace fs = std::filesystem;
  auto place = [&](const std::string& path) {
    if (path.empty()) return std::string();
    return (output_dir.empty() ? fs::path(path) : fs::path(output_dir) / fs::path(path).filename())
        .lexically_normal()
        .string();
  };
  bool any = !e.report.json.empty() || !e.report.markdown.empty() || !e.report.csv.empty() || !e.report.html.empty();
  ReportPaths paths =
      any ? ReportPaths{place(e.report.json), place(e.report.markdown), place(e.report.csv), place(e.report.html), ""}
          : default_paths(e, output_dir);
  if (!paths.json.empty()) paths.partial = paths.json + ".partial";
  std::vector<std::string> all;
  for (const std::string* path : {&paths.json, &paths.markdown, &paths.csv, &paths.html})
    if (!path->empty()) {
      if (std::find(all.begin(), all.end(), *path) != all.end())
        return make_error(fmt::format("{}: two report formats would be written to the same file '{}'", e.path, *path));
      all.push_back(*path);
    }
  for (const std::string& path : all) LAZYLAB_TRY(check_writable(path));
  return paths;
}

namespace {

// A failed peer's whole stderr goes beside the report (REPORT.peer-NAME.stderr),
// not into the progress output.
Status write_peer_errors(const std::vector<PeerResult>& peers, const ReportPaths& paths,
                         std::vector<std::string>& written) {
  std::string beside = !paths.json.empty() ? paths.json : !paths.markdown.empty() ? paths.markdown : paths.csv;
  if (beside.empty()) return {};
  for (const PeerResult& peer : peers) {
    if (peer.error.empty() || peer.stderr_text.empty()) continue;
    std::filesystem::path path = beside;
    path.replace_extension(fmt::format(".peer-{}.stderr", file_stem(peer.name)));
    LAZYLAB_TRY(write_file_atomically(path.string(), peer.stderr_text));
    written.push_back(path.string());
  }
  return {};
}

}  // namespace

Status write_reports(const nlohmann::json& report, const ReportPaths& paths, std::vector<std::string>& written) {
  auto loaded = report_from_json(report, paths.json.empty() ? "(this run)" : paths.json);
  if (!loaded) return loaded.error();
  std::pair<const std::string*, std::function<std::string()>> outputs[] = {
      {&paths.json, [&] { return json_text(report, 2); }},
      {&paths.markdown, [&] { return render_report(*loaded, ReportFormat::Markdown); }},
      {&paths.csv, [&] { return render_report(*loaded, ReportFormat::Csv); }},
      {&paths.html, [&] { return render_report(*loaded, ReportFormat::Html); }},
  };
  for (auto& [path, text] : outputs) {
    if (path->empty()) continue;
    LAZYLAB_TRY(write_file_atomically(*path, text()));
    written.push_back(*path);
  }
  LAZYLAB_TRY(write_peer_errors(loaded->peers, paths, written));
  std::error_code ec;
  if (!paths.partial.empty()) std::filesystem::remove(paths.partial, ec);
  return {};
}

Status write_partial(const ExperimentResult& result, const RunInfo& info, const ReportPaths& paths) {
  if (paths.partial.empty()) return {};
  return write_file_atomically(paths.partial, json_text(report_json(result, info), 1));
}

std::vector<DeviceCeilings> LoadedReport::device_ceilings_for(const Experiment& experiment) const {
  std::vector<DeviceCeilings> pinned(experiment.backends.size());
  for (size_t b = 0; b < pinned.size(); ++b)
    for (const BackendCeilings& d : device_ceilings)
      if (d.backend == experiment.backends[b].name && d.options == experiment.backends[b].options)
        pinned[b] = d.ceilings;
  return pinned;
}

namespace {

// What the renderings need of the experiment, as the report recorded it.
void read_experiment(const nlohmann::json& experiment, LoadedReport& report) {
  report.experiment_hash = experiment.at("hash").get<std::string>();
  report.experiment_path = experiment.value("path", "");
  report.shard = experiment.value("shard", "");
  report.isolated = experiment.value("isolate", false);
  for (const std::string& text : experiment.value("overrides", std::vector<std::string>{})) {
    auto parsed = parse_key_override(text);
    if (parsed) report.overrides.push_back(*parsed);
  }
  Experiment& e = report.experiment;
  e.name = experiment.value("name", "");
  e.description = experiment.value("description", "");
  e.path = report.experiment_path;
  e.hash = std::strtoull(report.experiment_hash.c_str(), nullptr, 16);
  e.seed = experiment.value("seed", uint64_t{0});
  e.baseline = experiment.value("baseline", "");
  e.warmup = experiment.value("warmup", int64_t{0});
  e.runs = experiment.value("runs", int64_t{0});
  e.profile_steps = experiment.value("profile_steps", int64_t{0});
  e.interleave = experiment.value("interleave", false);
  e.peer_rounds = experiment.value("peer_rounds", int64_t{0});
  e.flush_bytes = experiment.value("flush_bytes", int64_t{0});
  e.overrides = report.overrides;
  nlohmann::json reference = experiment.value("reference", nlohmann::json::object());
  e.reference.backend = reference.value("backend", "");
  e.reference.pipeline = reference.value("pipeline", "");
  e.reference.rtol = reference.value("rtol", 0.0);
  e.reference.atol = reference.value("atol", 0.0);
  e.reference.relative_to = reference.value("relative_to", "element");
  read_entries(experiment.value("entries", nlohmann::json::object()), e);
}

}  // namespace

ExperimentResult LoadedReport::result() const {
  ExperimentResult r;
  r.experiment = experiment;
  r.shard = shard;
  r.isolated = isolated;
  r.ceilings = ceilings;
  r.device_ceilings = device_ceilings_for(experiment);
  r.cells = cells;
  r.backend_devices = info.backend_devices;
  r.peers = peers;
  r.captures = captures;
  return r;
}

Expected<LoadedReport> load_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("{}: cannot open report", path));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return make_error(fmt::format("{}: not a JSON report", path));
  return report_from_json(json, path);
}

Expected<LoadedReport> report_from_json(const nlohmann::json& json, const std::string& path) {
  const nlohmann::json* stated = json.contains("schema_version") ? &json["schema_version"] : nullptr;
  int version = stated && stated->is_number_integer() ? stated->get<int>() : 0;
  if (version < kOldestReadableSchemaVersion || version > kReportSchemaVersion)
    return make_error(fmt::format("{}: report schema version {}, this lazylab reads versions {} to {}", path, version,
                                  kOldestReadableSchemaVersion, kReportSchemaVersion));
  LoadedReport report;
  report.path = path;
  try {
    read_experiment(json.at("experiment"), report);
    report.info = {json.value("started_at", ""),
                   json.value("machine", ""),
                   json.value("build", ""),
                   json.value("backend_devices", std::vector<std::string>{}),
                   json.value("merged_from", std::vector<std::string>{}),
                   json.value("plugins", std::vector<std::string>{})};
    for (const nlohmann::json& p : json.value("peers", nlohmann::json::array())) {
      PeerResult peer{p.value("name", ""),        p.value("command", std::vector<std::string>{}),
                      p.value("description", ""), p.value("error", ""),
                      p.value("stderr", ""),      {}};
      peer.clock = p.value("clock", "host") == "device" ? PeerClock::Device : PeerClock::Host;
      for (const nlohmann::json& c : p.value("cells", nlohmann::json::array())) {
        nlohmann::json step = c.value("step_ms", nlohmann::json::object());
        peer.cells.push_back({c.value("workload", ""), step.value("median", 0.0), step.value("min", 0.0),
                              step.value("max", 0.0), c.value("rounds_ms", std::vector<double>{}),
                              c.value("inputs", ""), c.value("train", "")});
      }
      report.peers.push_back(std::move(peer));
    }
    for (const nlohmann::json& c : json.value("captures", nlohmann::json::array())) {
      auto capture = capture_from_json(c);
      if (!capture) return make_error(fmt::format("{}: {}", path, capture.error().message));
      report.captures.push_back({c.value("workload_entry", size_t{0}), std::move(*capture)});
    }
    report.ceilings = ceilings_from_json(json.at("ceilings"));
    for (const nlohmann::json& d : json.value("device_ceilings", nlohmann::json::array()))
      report.device_ceilings.push_back(
          {d.value("backend", ""),
           d.value("options", ""),
           {d.value("copy_gb_s", 0.0), d.value("gemm_gflop_s", 0.0), d.value("method", "")}});
    for (const nlohmann::json& cell : json.at("cells")) {
      auto parsed = cell_from_json(cell);
      if (!parsed) return make_error(fmt::format("{}: {}", path, parsed.error().message));
      report.cells.push_back(std::move(*parsed));
    }
  } catch (const nlohmann::json::exception& ex) {
    return make_error(fmt::format("{}: malformed report: {}", path, ex.what()));
  }
  return report;
}

}  // namespace lazylab
