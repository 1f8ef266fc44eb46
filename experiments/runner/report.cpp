#include "report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/pass_plugin.h"
#include "core/version.h"
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

Status write_atomically(const std::filesystem::path& path, const std::string& text) {
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

std::string correctness_text(const Correctness& c) {
  return fmt::format("{} ({:.1e})", c.pass ? "ok" : "FAIL", c.max_abs_error);
}

// A peer's time beside the fastest correct lazylab cell on that workload.
struct PeerComparison {
  const PeerResult* peer;
  const PeerCell* peer_cell;
  const CellResult* best;  // null when no lazylab cell of that workload is correct
};

// Peers are given each workload's first entry (peers.h), so only that
// entry's cells compare with them.
std::vector<PeerComparison> peer_comparisons(const ExperimentResult& result) {
  std::vector<PeerComparison> rows;
  const std::vector<WorkloadEntry>& entries = result.experiment.workloads;
  for (const PeerResult& peer : result.peers)
    for (const PeerCell& pc : peer.cells) {
      auto first =
          std::find_if(entries.begin(), entries.end(), [&](const WorkloadEntry& w) { return w.name == pc.workload; });
      size_t entry = static_cast<size_t>(first - entries.begin());
      const CellResult* best = nullptr;
      for (const CellResult& c : result.cells)
        if (c.workload_entry == entry && c.status == CellStatus::Ok && (!best || c.time_ms() < best->time_ms()))
          best = &c;
      rows.push_back({&peer, &pc, best});
    }
  return rows;
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
      if (row.best)
        cell["best_lazylab"] = {{"pipeline", row.best->pipeline},
                                {"backend", row.best->backend},
                                {"backend_options", row.best->backend_options},
                                {"step_ms", row.best->time_ms()},
                                {"timed_on_device", row.best->timed_on_device()},
                                {"peer_over_lazylab", row.peer_cell->median_ms / row.best->time_ms()}};
      cells.push_back(std::move(cell));
    }
    peers.push_back({{"name", peer.name},
                     {"command", peer.command},
                     {"description", peer.description},
                     {"error", peer.error},
                     {"cells", std::move(cells)}});
  }
  return peers;
}

std::string peers_text(const ExperimentResult& result, bool markdown) {
  if (result.peers.empty()) return "";
  std::string out = markdown ? "\n## Peers, measured in this run\n\nRatio: the peer's median step over the fastest "
                               "correct lazylab cell's (above 1: lazylab is faster).\n\n"
                             : "\n";
  for (const PeerResult& peer : result.peers) {
    std::string name = markdown ? "- `" + peer.name + "`: " : "peer " + peer.name + ": ";
    std::string failed = markdown ? "**not run**: " : "NOT RUN: ";
    out += name + (peer.error.empty() ? peer.description : failed + peer.error) + "\n";
  }
  std::vector<PeerComparison> rows = peer_comparisons(result);
  if (rows.empty()) return out;
  out += markdown ? "\n| workload | peer | peer ms | fastest lazylab | lazylab ms | peer / lazylab |\n"
                    "|---|---|---:|---|---:|---:|\n"
                  : fmt::format("{:<22} {:<14} {:>10} {:<26} {:>11} {:>8}\n", "workload", "peer", "peer ms",
                                "fastest lazylab", "lazylab ms", "ratio");
  for (const PeerComparison& row : rows) {
    std::string where = row.best ? row.best->pipeline + " / " + row.best->backend_shown : "none correct";
    double mine = row.best ? row.best->time_ms() : 0;
    double ratio = row.best ? row.peer_cell->median_ms / mine : 0;
    out += markdown ? fmt::format("| {} | {} | {:.4f} | {} | {:.4f} | {:.2f}x |\n", row.peer_cell->workload,
                                  row.peer->name, row.peer_cell->median_ms, where, mine, ratio)
                    : fmt::format("{:<22} {:<14} {:>10.4f} {:<26} {:>11.4f} {:>7.2f}x\n", row.peer_cell->workload,
                                  row.peer->name, row.peer_cell->median_ms, where, mine, ratio);
  }
  return out;
}

}  // namespace

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

nlohmann::json overrides_json(const Experiment& e) {
  nlohmann::json list = nlohmann::json::array();
  for (const KeyOverride& o : e.overrides) list.push_back(o.key + "=" + o.value);
  return list;
}

nlohmann::json report_json(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  nlohmann::json cells = nlohmann::json::array();
  for (const CellResult& c : result.cells) cells.push_back(cell_to_json(c));
  return {{"schema_version", kReportSchemaVersion},
          {"experiment",
           {{"name", e.name},
            {"path", e.path},
            {"hash", fmt::format("{:016x}", e.hash)},
            {"seed", e.seed},
            {"baseline", e.baseline},
            {"warmup", e.warmup},
            {"runs", e.runs},
            {"interleave", e.interleave},
            {"overrides", overrides_json(e)},
            {"shard", result.shard},
            {"isolate", result.isolated},
            {"reference",
             {{"backend", e.reference.backend},
              {"pipeline", e.reference.pipeline},
              {"rtol", e.reference.rtol},
              {"atol", e.reference.atol}}}}},
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
          {"peers", peers_json(result)}};
}

namespace {

std::string speedup_text(const CellResult& c, bool markdown) {
  if (c.speedup.value <= 0) return "-";
  if (c.speedup.low == c.speedup.high) return fmt::format("{:.2f}x", c.speedup.value);
  std::string verdict = c.speedup_verdict != Verdict::NoSignificantDifference ? ""
                        : markdown                                            ? " no significant difference"
                                                                              : " n.s.";
  return fmt::format("{:.2f}x [{:.2f}, {:.2f}]{}", c.speedup.value, c.speedup.low, c.speedup.high, verdict);
}

std::string time_text(const CellResult& c) {
  return fmt::format("{:.4f} [{:.4f}, {:.4f}]{}", c.time.value, c.time.low, c.time.high, c.noisy ? " NOISY" : "");
}

std::string recompile_text(const ExperimentResult& result, const CellResult& c) {
  return recompile_warning(c, 1 + result.experiment.warmup + result.experiment.runs);
}

// One line per cell that recompiles on most steps, naming why.
std::string recompile_lines(const ExperimentResult& result, const std::string& prefix) {
  std::string out;
  for (const CellResult& c : result.cells)
    if (std::string text = recompile_text(result, c); !text.empty())
      out += fmt::format("{}{} / {} / {}: {}\n", prefix, c.workload_shown, c.pipeline, c.backend_shown, text);
  return out;
}

// Refusals by code, one row per cell that has any.
std::string fusion_refusals_text(const ExperimentResult& result) {
  std::string rows;
  for (const CellResult& c : result.cells) {
    if (c.fusion_refusals.empty()) continue;
    std::vector<std::string> counts;
    for (auto& [code, count] : c.fusion_refusals) counts.push_back(fmt::format("{} {}", code, count));
    rows +=
        fmt::format("| {} | {} | {} | {} |\n", c.workload_shown, c.pipeline, c.backend_shown, fmt::join(counts, ", "));
  }
  if (rows.empty()) return "";
  return "\n## Fusion refusals by reason\n\nPairs the fusion strategy declined, counted by reason code (`lazylab "
         "show --explain-fusion` lists each with its detail).\n\n| workload | pipeline | backend | refusals |\n"
         "|---|---|---|---|\n" +
         rows;
}

std::string outcome_text(const CellResult& c) {
  switch (c.status) {
    case CellStatus::Ok: return correctness_text(c.correctness);
    case CellStatus::Mismatch: return correctness_text(c.correctness) + ": " + c.correctness.problem;
    case CellStatus::Failed: return "FAILED: " + c.error;
    case CellStatus::Crashed: return "CRASHED: " + c.error;
  }
  return "";
}

// "2 of 12 cells failed, 1 mismatched; 3 too noisy to rank", or "".
std::string outcome_summary(const ExperimentResult& result) {
  std::vector<std::string> parts;
  if (size_t failed = result.failed_cells())
    parts.push_back(fmt::format("{} of {} cells failed", failed, result.cells.size()));
  if (size_t mismatched = result.cells_with(CellStatus::Mismatch))
    parts.push_back(fmt::format("{} of {} cells do not match the reference", mismatched, result.cells.size()));
  size_t noisy = static_cast<size_t>(
      std::count_if(result.cells.begin(), result.cells.end(), [](const CellResult& c) { return c.noisy; }));
  size_t recompiling =
      static_cast<size_t>(std::count_if(result.cells.begin(), result.cells.end(),
                                        [&](const CellResult& c) { return !recompile_text(result, c).empty(); }));
  if (recompiling)
    parts.push_back(fmt::format("{} of {} cells recompile on most steps (see each cell's recompilations)", recompiling,
                                result.cells.size()));
  if (noisy)
    parts.push_back(
        fmt::format("{} of {} cells too noisy to rank (95% interval of the median wider than {:.0f}% "
                    "of it): more runs or a quieter machine",
                    noisy, result.cells.size(), 100 * kNoisyRelativeWidth));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::string report_console(const ExperimentResult& result) {
  size_t workload_width = 8, pipeline_width = 8, backend_width = 7;
  for (const CellResult& c : result.cells) {
    workload_width = std::max(workload_width, std::min<size_t>(c.workload_shown.size(), 40));
    pipeline_width = std::max(pipeline_width, c.pipeline.size());
    backend_width = std::max(backend_width, c.backend_shown.size());
  }
  auto shorten = [&](const std::string& text) {
    return text.size() > workload_width ? "..." + text.substr(text.size() - workload_width + 3) : text;
  };
  std::string out =
      fmt::format("{:<{}} {:<{}} {:<{}} {:>7} {:>11} {:>32} {:>12} {:>26} {:>7}  {}\n", "workload", workload_width,
                  "pipeline", pipeline_width, "backend", backend_width, "kernels", "compile ms", "time ms [95% CI]",
                  "hit sync us", "speedup [95% CI]", "%floor", "correct (max abs err)");
  for (const CellResult& c : result.cells) {
    std::string identity = fmt::format("{:<{}} {:<{}} {:<{}}", shorten(c.workload_shown), workload_width, c.pipeline,
                                       pipeline_width, c.backend_shown, backend_width);
    if (!c.ran()) {
      out += fmt::format("{} {}\n", identity, outcome_text(c));
      continue;
    }
    out += fmt::format("{} {:>7} {:>11.3f} {:>32} {:>12.2f} {:>26} {:>6.1f}%  {}\n", identity, c.kernels, c.compile_ms,
                       time_text(c), c.hit_sync_overhead_us.median, speedup_text(c, false), 100 * c.floor_fraction,
                       outcome_text(c));
  }
  out +=
      "time: the device time on a device backend, else the host step; n.s.: no significant difference from the "
      "baseline (its 95% interval holds 1)\n";
  if (std::string summary = outcome_summary(result); !summary.empty()) out += "WARNING: " + summary + "\n";
  out += recompile_lines(result, "WARNING: ");
  out += peers_text(result, false);
  return out;
}

std::string report_markdown(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  std::string out = fmt::format("# Experiment `{}`\n\n{}\n\n", e.name, e.description);
  if (std::string summary = outcome_summary(result); !summary.empty()) out += "**Warning: " + summary + ".**\n\n";
  if (std::string lines = recompile_lines(result, "- "); !lines.empty()) out += "Recompilations:\n\n" + lines + "\n";
  out += fmt::format("- experiment file: `{}` (hash `{:016x}`), seed {}\n- started: {}\n- machine: {}\n- build: {}\n",
                     e.path, e.hash, e.seed, info.started_at, info.machine, info.build);
  for (const KeyOverride& o : e.overrides) out += fmt::format("- overridden: `--set {}={}`\n", o.key, o.value);
  for (const std::string& plugin : info.plugins) out += fmt::format("- plugin: {}\n", plugin);
  out += fmt::format(
      "- repeats: {} warm-up + {} timed steps after the cold step{}; baseline pipeline `{}`\n- statistics: median "
      "with its 95% bootstrap interval ({} resamples); a speedup's interval resamples both cells, and where it "
      "holds 1 the difference is not significant\n",
      e.warmup, e.runs,
      result.isolated ? ", each cell in its own child process, cell after cell"
      : e.interleave  ? ", the cells of a workload interleaved (round-robin, shuffled each round)"
                      : ", cell after cell",
      e.baseline, kBootstrapResamples);
  out += fmt::format(
      "- ceilings: copy {:.1f} GB/s (read + written), elementwise {:.1f} Gop/s, sgemm {:.1f} GFLOP/s ({}); {}\n",
      result.ceilings.copy_gb_s, result.ceilings.elementwise_gop_s, result.ceilings.sgemm_gflop_s, result.ceilings.blas,
      result.ceilings.method);
  for (size_t b = 0; b < result.device_ceilings.size(); ++b)
    if (result.device_ceilings[b].measured())
      out += fmt::format(
          "- device ceilings of `{}`: copy {:.0f} GB/s, f32 GEMM {:.0f} GFLOP/s ({}); its "
          "cells are timed on the device (CUDA events) and their floors use these\n",
          e.backends[b].name, result.device_ceilings[b].copy_gb_s, result.device_ceilings[b].gemm_gflop_s,
          result.device_ceilings[b].method);
  out += fmt::format("- reference: `{}` with `{}`, rtol {}, atol {}\n", e.reference.backend, e.reference.pipeline,
                     e.reference.rtol, e.reference.atol);
  for (const PipelineEntry& p : e.pipelines) out += fmt::format("- pipeline `{}`: `{}`\n", p.name, p.text);
  for (const BackendEntry& b : e.backends)
    if (!b.options.empty() || !b.label.empty())
      out +=
          fmt::format("- backend {}: `{}` with options `{}`\n", b.label.empty() ? b.name : b.label, b.name, b.options);
  out += "\n";
  out +=
      "| workload | pipeline | backend | kernels | arena KiB (naive) | compile ms (again) | time ms [95% CI] | min | "
      "max | hit sync µs | speedup [95% CI] | correct | max abs err | max rel err |\n";
  out += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const CellResult& c : result.cells) {
    if (!c.ran()) {
      out += fmt::format("| {} | {} | {} | | | | | | | | | **{}** | | |\n", c.workload_shown, c.pipeline,
                         c.backend_shown, outcome_text(c));
      continue;
    }
    const Spread& spread = c.timed_on_device() ? c.device_ms : c.step_ms;
    out += fmt::format(
        "| {} | {} | {} | {} | {} ({}) | {:.3f} ({:.3f}) | {} | {:.4f} | {:.4f} | {:.2f} | {} | {} | {:.2e} | "
        "{:.2e} |\n",
        c.workload_shown, c.pipeline, c.backend_shown, c.kernels, c.arena_bytes / 1024, c.naive_arena_bytes / 1024,
        c.compile_ms, c.recompile_ms, time_text(c), spread.min, spread.max, c.hit_sync_overhead_us.median,
        speedup_text(c, true), c.status == CellStatus::Ok ? "yes" : "**no**", c.correctness.max_abs_error,
        c.correctness.max_rel_error);
  }
  out +=
      "\n## Traffic and floor\n\nBytes moved: what the kernels read and write across their boundaries. Floor: "
      "the largest of the minimum bytes (inputs read once, outputs written once) at copy bandwidth, the matmul FLOPs "
      "at the sgemm rate, and the elementwise ops (the fewest any pipeline here needed) at the elementwise rate. "
      "A share of copy bandwidth above 100% means the step moved less through memory than its kernels' boundary "
      "traffic: data stayed resident in cache between kernels (or steps), which the floor does not assume."
      "\n\n| workload | pipeline | backend | MB moved | GB/s | % copy bandwidth | floor ms | % of "
      "floor |\n|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const CellResult& c : result.cells)
    if (c.ran())
      out += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f}% | {:.3f} | {:.1f}% |\n", c.workload_shown,
                         c.pipeline, c.backend_shown, static_cast<double>(c.cost.total_bytes) / 1e6, c.achieved_gb_s,
                         100 * c.copy_bandwidth_fraction, c.floor_ms, 100 * c.floor_fraction);
  out += peers_text(result, true);
  out += fusion_refusals_text(result);
  out +=
      "\n## Passes (cold compile)\n\n| workload | pipeline | backend | pass | ms | nodes before → after | kernels "
      "after |\n|---|---|---|---|---:|---:|---:|\n";
  for (const CellResult& c : result.cells)
    for (const PassStat& p : c.passes)
      out += fmt::format("| {} | {} | {} | `{}` | {:.3f} | {} → {} | {} |\n", c.workload_shown, c.pipeline,
                         c.backend_shown, p.pass, p.milliseconds, p.nodes_before, p.nodes_after, p.kernels_after);
  return out;
}

Expected<ReportPaths> plan_reports(const Experiment& e, const std::string& output_dir) {
  namespace fs = std::filesystem;
  auto place = [&](const std::string& path) {
    if (path.empty()) return std::string();
    return (output_dir.empty() ? fs::path(path) : fs::path(output_dir) / fs::path(path).filename())
        .lexically_normal()
        .string();
  };
  ReportPaths paths{place(e.report.json), place(e.report.markdown), ""};
  if (!paths.json.empty()) paths.partial = paths.json + ".partial";
  if (!paths.json.empty() && paths.json == paths.markdown)
    return make_error(fmt::format("{}: report.json and report.markdown are the same file '{}'", e.path, paths.json));
  for (const std::string& path : {paths.json, paths.markdown}) {
    if (path.empty()) continue;
    fs::path folder = fs::path(path).parent_path();
    if (folder.empty()) folder = ".";
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (fs::is_directory(path, ec)) return make_error(fmt::format("report path '{}' is a folder", path));
    // A probe file proves the folder takes new files before hours of cells.
    fs::path probe = folder / fmt::format(".lazylab-probe-{}", ::getpid());
    if (!std::ofstream(probe)) return make_error(fmt::format("cannot write reports into '{}'", folder.string()));
    fs::remove(probe, ec);
  }
  return paths;
}

Status write_reports(const ExperimentResult& result, const RunInfo& info, const ReportPaths& paths,
                     std::vector<std::string>& written) {
  if (!paths.json.empty()) {
    LAZYLAB_TRY(write_atomically(paths.json, json_text(report_json(result, info), 2)));
    written.push_back(paths.json);
  }
  if (!paths.markdown.empty()) {
    LAZYLAB_TRY(write_atomically(paths.markdown, report_markdown(result, info)));
    written.push_back(paths.markdown);
  }
  std::error_code ec;
  if (!paths.partial.empty()) std::filesystem::remove(paths.partial, ec);
  return {};
}

Status write_partial(const ExperimentResult& result, const RunInfo& info, const ReportPaths& paths) {
  if (paths.partial.empty()) return {};
  return write_atomically(paths.partial, json_text(report_json(result, info), 1));
}

std::vector<DeviceCeilings> LoadedReport::device_ceilings_for(const Experiment& experiment) const {
  std::vector<DeviceCeilings> pinned(experiment.backends.size());
  for (size_t b = 0; b < pinned.size(); ++b)
    for (const BackendCeilings& d : device_ceilings)
      if (d.backend == experiment.backends[b].name && d.options == experiment.backends[b].options)
        pinned[b] = d.ceilings;
  return pinned;
}

Expected<LoadedReport> load_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("{}: cannot open report", path));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return make_error(fmt::format("{}: not a JSON report", path));
  if (json.value("schema_version", 0) != kReportSchemaVersion)
    return make_error(fmt::format("{}: report schema version {}, this lazylab reads version {}", path,
                                  json.value("schema_version", 0), kReportSchemaVersion));
  LoadedReport report;
  report.path = path;
  try {
    const nlohmann::json& experiment = json.at("experiment");
    report.experiment_hash = experiment.at("hash").get<std::string>();
    report.experiment_path = experiment.value("path", "");
    report.shard = experiment.value("shard", "");
    for (const std::string& text : experiment.value("overrides", std::vector<std::string>{})) {
      auto parsed = parse_key_override(text);
      if (parsed) report.overrides.push_back(*parsed);
    }
    report.info = {json.value("started_at", ""),
                   json.value("machine", ""),
                   json.value("build", ""),
                   json.value("backend_devices", std::vector<std::string>{}),
                   json.value("merged_from", std::vector<std::string>{}),
                   json.value("plugins", std::vector<std::string>{})};
    for (const nlohmann::json& p : json.value("peers", nlohmann::json::array())) {
      PeerResult peer{p.value("name", ""),
                      p.value("command", std::vector<std::string>{}),
                      p.value("description", ""),
                      p.value("error", ""),
                      {}};
      for (const nlohmann::json& c : p.value("cells", nlohmann::json::array())) {
        nlohmann::json step = c.value("step_ms", nlohmann::json::object());
        peer.cells.push_back(
            {c.value("workload", ""), step.value("median", 0.0), step.value("min", 0.0), step.value("max", 0.0)});
      }
      report.peers.push_back(std::move(peer));
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
