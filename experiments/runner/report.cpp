#include "report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "build_info.h"

#ifndef LAZYLAB_VERSION
#define LAZYLAB_VERSION "unknown"
#endif
#ifndef LAZYLAB_BUILD_TYPE
#define LAZYLAB_BUILD_TYPE "unknown"
#endif

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

nlohmann::json spread_json(const Spread& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

nlohmann::json cell_json(const CellResult& c) {
  nlohmann::json passes = nlohmann::json::array();
  for (const PassStat& p : c.passes)
    passes.push_back({{"pass", p.pass},
                      {"ms", p.milliseconds},
                      {"nodes_before", p.nodes_before},
                      {"nodes_after", p.nodes_after},
                      {"kernels_after", p.kernels_after},
                      {"changed", p.changed}});
  nlohmann::json cell = {{"workload", c.workload},
                         {"workload_params", c.workload_params},
                         {"pipeline", c.pipeline},
                         {"pipeline_text", c.pipeline_text},
                         {"backend", c.backend},
                         {"backend_options", c.backend_options},
                         {"label", c.label},
                         {"correctness",
                          {{"pass", c.correctness.pass},
                           {"max_abs_error", c.correctness.max_abs_error},
                           {"max_rel_error", c.correctness.max_rel_error},
                           {"problem", c.correctness.problem}}},
                         {"kernels", c.kernels},
                         {"arena_bytes", c.arena_bytes},
                         {"naive_arena_bytes", c.naive_arena_bytes},
                         {"kernel_bytes", c.cost.kernel_bytes},
                         {"bytes_moved", c.cost.total_bytes},
                         {"minimum_bytes", c.cost.minimum_bytes},
                         {"flops", c.cost.flops},
                         {"elementwise_ops", c.cost.elementwise_ops},
                         {"achieved_gb_s", c.achieved_gb_s},
                         {"copy_bandwidth_fraction", c.copy_bandwidth_fraction},
                         {"floor_ms", c.floor_ms},
                         {"floor_fraction", c.floor_fraction},
                         {"device_ceilings", c.device_ceilings},
                         {"compile_ms", c.compile_ms},
                         {"recompile_ms", c.recompile_ms},
                         {"cold_step_ms", c.cold_step_ms},
                         {"step_ms", spread_json(c.step_ms)},
                         {"trace_us", spread_json(c.trace_us)},
                         {"hit_sync_overhead_us", spread_json(c.hit_sync_overhead_us)},
                         {"execute_ms", spread_json(c.execute_ms)},
                         {"device_ms", spread_json(c.device_ms)},
                         {"nodes_per_step", c.nodes_per_step},
                         {"ops_per_step", c.ops_per_step},
                         {"speedup_vs_baseline", c.speedup_vs_baseline},
                         {"passes", passes},
                         {"metrics",
                          {{"traces", c.metrics.traces},
                           {"nodes_traced", c.metrics.nodes_traced},
                           {"cache_hits", c.metrics.cache_hits},
                           {"cache_misses", c.metrics.cache_misses},
                           {"evictions", c.metrics.evictions},
                           {"compile_ms", c.metrics.compile_ms},
                           {"execute_ms", c.metrics.execute_ms},
                           {"device_execute_ms", c.metrics.device_execute_ms},
                           {"host_to_device_transfers", c.metrics.host_to_device_transfers},
                           {"host_to_device_bytes", c.metrics.host_to_device_bytes},
                           {"device_to_host_transfers", c.metrics.device_to_host_transfers},
                           {"device_to_host_bytes", c.metrics.device_to_host_bytes}}}};
  if (c.ops_per_step > 0) cell["step_us_per_op"] = c.step_ms.median * 1e3 / static_cast<double>(c.ops_per_step);
  return cell;
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
        if (c.workload_entry == entry && c.correctness.pass && (!best || c.time_ms() < best->time_ms())) best = &c;
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
                                {"timed_on_device", row.best->device_ceilings},
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

RunInfo collect_run_info(const std::vector<std::string>& backend_devices) {
  RunInfo info;
  info.started_at = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                                fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  utsname names{};
  uname(&names);
  info.machine = fmt::format("{}, {} hardware threads, {} memory, {} {} {}",
                             first_line_with("/proc/cpuinfo", "model name"), std::thread::hardware_concurrency(),
                             first_line_with("/proc/meminfo", "MemTotal"), names.sysname, names.release, names.machine);
  info.build = fmt::format("lazylab {} ({}), {} build, compiler {}", LAZYLAB_VERSION, LAZYLAB_GIT_REVISION,
                           LAZYLAB_BUILD_TYPE, __VERSION__);
  info.backend_devices = backend_devices;
  return info;
}

nlohmann::json device_ceilings_json(const ExperimentResult& result) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t b = 0; b < result.device_ceilings.size(); ++b) {
    const DeviceCeilings& d = result.device_ceilings[b];
    if (d.measured())
      list.push_back({{"backend", result.experiment.backends[b].name},
                      {"options", result.experiment.backends[b].options},
                      {"copy_gb_s", d.copy_gb_s},
                      {"gemm_gflop_s", d.gemm_gflop_s},
                      {"method", d.method}});
  }
  return list;
}

nlohmann::json report_json(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  nlohmann::json cells = nlohmann::json::array();
  for (const CellResult& c : result.cells) cells.push_back(cell_json(c));
  return {{"schema_version", kReportSchemaVersion},
          {"experiment",
           {{"name", e.name},
            {"path", e.path},
            {"hash", fmt::format("{:016x}", e.hash)},
            {"seed", e.seed},
            {"baseline", e.baseline},
            {"warmup", e.warmup},
            {"runs", e.runs},
            {"reference",
             {{"backend", e.reference.backend},
              {"pipeline", e.reference.pipeline},
              {"rtol", e.reference.rtol},
              {"atol", e.reference.atol}}}}},
          {"started_at", info.started_at},
          {"ceilings",
           {{"copy_gb_s", result.ceilings.copy_gb_s},
            {"elementwise_gop_s", result.ceilings.elementwise_gop_s},
            {"sgemm_gflop_s", result.ceilings.sgemm_gflop_s},
            {"blas", result.ceilings.blas}}},
          {"device_ceilings", device_ceilings_json(result)},
          {"machine", info.machine},
          {"build", info.build},
          {"backend_devices", info.backend_devices},
          {"all_correct", result.all_correct()},
          {"cells", cells},
          {"peers", peers_json(result)}};
}

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
      fmt::format("{:<{}} {:<{}} {:<{}} {:>7} {:>11} {:>11} {:>11} {:>12} {:>8} {:>7}  {}\n", "workload",
                  workload_width, "pipeline", pipeline_width, "backend", backend_width, "kernels", "compile ms",
                  "step ms", "min ms", "hit sync us", "speedup", "%floor", "correct (max abs err)");
  for (const CellResult& c : result.cells)
    out += fmt::format("{:<{}} {:<{}} {:<{}} {:>7} {:>11.3f} {:>11.4f} {:>11.4f} {:>12.2f} {:>7.2f}x {:>6.1f}%  {}\n",
                       shorten(c.workload_shown), workload_width, c.pipeline, pipeline_width, c.backend_shown,
                       backend_width, c.kernels, c.compile_ms, c.step_ms.median, c.step_ms.min,
                       c.hit_sync_overhead_us.median, c.speedup_vs_baseline, 100 * c.floor_fraction,
                       correctness_text(c.correctness));
  out += peers_text(result, false);
  return out;
}

std::string report_markdown(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  std::string out = fmt::format("# Experiment `{}`\n\n{}\n\n", e.name, e.description);
  out += fmt::format("- experiment file: `{}` (hash `{:016x}`), seed {}\n- started: {}\n- machine: {}\n- build: {}\n",
                     e.path, e.hash, e.seed, info.started_at, info.machine, info.build);
  out += fmt::format("- repeats: {} warm-up + {} timed steps after the cold step; baseline pipeline `{}`\n", e.warmup,
                     e.runs, e.baseline);
  out += fmt::format(
      "- ceilings measured at the start of this run: copy {:.1f} GB/s (read + written), elementwise {:.1f} Gop/s "
      "(add, mul, max on data in registers, all threads), sgemm {:.1f} GFLOP/s (1024³, {})\n",
      result.ceilings.copy_gb_s, result.ceilings.elementwise_gop_s, result.ceilings.sgemm_gflop_s,
      result.ceilings.blas);
  for (size_t b = 0; b < result.device_ceilings.size(); ++b)
    if (result.device_ceilings[b].measured())
      out += fmt::format(
          "- device ceilings of `{}`, measured by the backend: copy {:.0f} GB/s, f32 GEMM {:.0f} GFLOP/s ({}); its "
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
      "| workload | pipeline | backend | kernels | arena KiB (naive) | compile ms (again) | step ms (median) | min | "
      "max | device ms | hit sync µs | speedup | correct | max abs err | max rel err |\n";
  out += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const CellResult& c : result.cells)
    out += fmt::format(
        "| {} | {} | {} | {} | {} ({}) | {:.3f} ({:.3f}) | {:.4f} | {:.4f} | {:.4f} | {:.4f} | {:.2f} | {:.2f}x | {} | "
        "{:.2e} | {:.2e} |\n",
        c.workload_shown, c.pipeline, c.backend_shown, c.kernels, c.arena_bytes / 1024, c.naive_arena_bytes / 1024,
        c.compile_ms, c.recompile_ms, c.step_ms.median, c.step_ms.min, c.step_ms.max, c.device_ms.median,
        c.hit_sync_overhead_us.median, c.speedup_vs_baseline, c.correctness.pass ? "yes" : "**no**",
        c.correctness.max_abs_error, c.correctness.max_rel_error);
  out +=
      "\n## Traffic and floor\n\nBytes moved: what the kernels read and write across their boundaries. Floor: "
      "the largest of the minimum bytes (inputs read once, outputs written once) at copy bandwidth, the matmul FLOPs "
      "at the sgemm rate, and the elementwise ops (the fewest any pipeline here needed) at the elementwise rate."
      "\n\n| workload | pipeline | backend | MB moved | GB/s | % copy bandwidth | floor ms | % of "
      "floor |\n|---|---|---|---:|---:|---:|---:|---:|\n";
  for (const CellResult& c : result.cells)
    out += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f}% | {:.3f} | {:.1f}% |\n", c.workload_shown,
                       c.pipeline, c.backend_shown, static_cast<double>(c.cost.total_bytes) / 1e6, c.achieved_gb_s,
                       100 * c.copy_bandwidth_fraction, c.floor_ms, 100 * c.floor_fraction);
  out += peers_text(result, true);
  out +=
      "\n## Passes (cold compile)\n\n| workload | pipeline | backend | pass | ms | nodes before → after | kernels "
      "after |\n|---|---|---|---|---:|---:|---:|\n";
  for (const CellResult& c : result.cells)
    for (const PassStat& p : c.passes)
      out += fmt::format("| {} | {} | {} | `{}` | {:.3f} | {} → {} | {} |\n", c.workload_shown, c.pipeline,
                         c.backend_shown, p.pass, p.milliseconds, p.nodes_before, p.nodes_after, p.kernels_after);
  return out;
}

Status write_reports(const ExperimentResult& result, const RunInfo& info, const std::string& output_dir,
                     std::vector<std::string>& written) {
  auto place = [&](const std::string& path) {
    return output_dir.empty() ? std::filesystem::path(path)
                              : std::filesystem::path(output_dir) / std::filesystem::path(path).filename();
  };
  if (!result.experiment.report.json.empty()) {
    auto path = place(result.experiment.report.json);
    LAZYLAB_TRY(write_atomically(path, report_json(result, info).dump(2) + "\n"));
    written.push_back(path.string());
  }
  if (!result.experiment.report.markdown.empty()) {
    auto path = place(result.experiment.report.markdown);
    LAZYLAB_TRY(write_atomically(path, report_markdown(result, info)));
    written.push_back(path.string());
  }
  return {};
}

}  // namespace lazylab
