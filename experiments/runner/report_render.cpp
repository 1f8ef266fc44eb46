// The report's renderings for people (console, Markdown) and programs (CSV),
// all from a report read back from its JSON; the tables come from
// report_tables.h, this file adds the prose around them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "output_check.h"
#include "report.h"
#include "report_html.h"
#include "report_tables.h"

namespace lazylab {
namespace {

std::vector<const CellResult*> all_cells(const ExperimentResult& result) {
  std::vector<const CellResult*> rows;
  for (const CellResult& c : result.cells) rows.push_back(&c);
  return rows;
}

// Each cell's backend decisions at its cold compile (autotuning: the
// candidates' times and the choice), where a backend reported any.
std::string compile_notes_text(const std::vector<const CellResult*>& cells) {
  std::string out;
  for (const CellResult* c : cells) {
    if (c->compile_notes.empty()) continue;
    out += fmt::format("\n- {} / {} / {}:\n", c->workload_shown, c->pipeline, c->backend_shown);
    for (const std::string& note : c->compile_notes) out += fmt::format("  - {}\n", note);
  }
  if (out.empty()) return "";
  return "\n## Backend decisions (cold compile)\n\nWhat each cell's backend chose while compiling, with the "
         "candidates it timed and where its code came from.\n" +
         out;
}

std::string peers_text(const ExperimentResult& result, ReportFormat format) {
  if (result.peers.empty()) return "";
  bool markdown = format == ReportFormat::Markdown;
  std::string out = markdown ? "\n## Peers, measured in this run\n\nRatio: the peer's median step over the fastest "
                               "correct lazylab cell's (above 1: lazylab is faster), on the peer's clock: device "
                               "time against a peer timed by device events, the host step (trace, sync and wait) "
                               "against one timed on the host.\n\n"
                             : "\n";
  bool in_rounds = std::any_of(result.peers.begin(), result.peers.end(), [](const PeerResult& peer) {
    return std::any_of(peer.cells.begin(), peer.cells.end(), [](const PeerCell& c) { return !c.round_ms.empty(); });
  });
  if (markdown && in_rounds) {
    int64_t rounds = std::max<int64_t>(1, result.experiment.peer_rounds);
    out += fmt::format(
        "Each peer timed each workload in {} rounds beside its cells, {} steps a round after its warm-up, a round "
        "before each of {} equal shares of the cells' timed rounds: its median is the rounds' median, and each "
        "round's ratio is to the fastest cell's steps in the share that followed it.\n\n",
        rounds, std::max<int64_t>(1, result.experiment.runs / rounds), rounds);
  }
  for (const PeerResult& peer : result.peers) {
    std::string name = markdown ? "- `" + peer.name + "`: " : "peer " + peer.name + ": ";
    std::string failed = markdown ? "**not run**: " : "NOT RUN: ";
    out += name + (peer.error.empty() ? peer.description : failed + peer.error) + "\n";
  }
  std::vector<PeerComparison> rows = peer_comparisons(result);
  if (rows.empty()) return out;
  std::vector<const PeerComparison*> pointers;
  for (const PeerComparison& row : rows) pointers.push_back(&row);
  return out + "\n" + render_table(peer_columns(), pointers, format);
}

// The torch workloads' captures: what each cost and how its step compared
// with eager PyTorch's.
std::string captures_text(const ExperimentResult& result, ReportFormat format) {
  std::vector<CaptureRow> rows = capture_rows(result);
  if (rows.empty()) return "";
  std::vector<const CaptureRow*> pointers;
  for (const CaptureRow& row : rows) pointers.push_back(&row);
  std::string table = render_table(capture_columns(), pointers, format);
  if (format == ReportFormat::Markdown) return fmt::format("\n## PyTorch captures\n\n{}\n\n{}", kCaptureNote, table);
  return fmt::format("\n{}{}\n", table, kCaptureNote);
}

std::string console(const ExperimentResult& result) {
  CellColumns columns = join_columns(
      {&cell_identity_columns(), &cell_measure_columns(), &cell_traffic_columns(), &cell_outcome_columns()});
  std::string out = render_table(columns, all_cells(result), ReportFormat::Console);
  out +=
      "time: the device time on a device backend, else the host step; n.s.: no significant difference from the "
      "baseline (its 95% interval holds 1)\n";
  if (probed_in_rounds(result)) out += std::string(kRoundsFloorNote) + "\n";
  if (std::string summary = outcome_summary(result); !summary.empty()) out += "WARNING: " + summary + "\n";
  out += recompile_lines(result, "WARNING: ");
  out += captures_text(result, ReportFormat::Console);
  out += peers_text(result, ReportFormat::Console);
  return out;
}

std::string markdown_header(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  std::string out = fmt::format("# Experiment `{}`\n\n{}\n\n", e.name, e.description);
  if (std::string summary = outcome_summary(result); !summary.empty()) out += "**Warning: " + summary + ".**\n\n";
  if (std::string lines = recompile_lines(result, "- "); !lines.empty()) out += "Recompilations:\n\n" + lines + "\n";
  out += fmt::format("- experiment file: `{}` (hash `{:016x}`), seed {}\n- started: {}\n- machine: {}\n- build: {}\n",
                     e.path, e.hash, e.seed, info.started_at, info.machine, info.build);
  for (const std::string& device : info.backend_devices) out += fmt::format("- backend {}\n", device);
  for (const KeyOverride& o : e.overrides) out += fmt::format("- overridden: `--set {}={}`\n", o.key, o.value);
  for (const std::string& plugin : info.plugins) out += fmt::format("- plugin: {}\n", plugin);
  for (const std::string& shard : info.merged_from) out += fmt::format("- merged from {}\n", shard);
  out += fmt::format(
      "- repeats: {} warm-up + {} timed steps after the cold step{}{}; baseline pipeline `{}`\n- statistics: median "
      "with its 95% bootstrap interval ({} resamples); a speedup's interval resamples both cells, and where it "
      "holds 1 the difference is not significant (n.s.)\n",
      e.warmup, e.runs,
      result.isolated ? ", each cell in its own child process, cell after cell"
      : e.interleave  ? ", the cells of a workload interleaved (round-robin, shuffled each round)"
                      : ", cell after cell",
      e.flush_bytes ? fmt::format(", each after {} MiB written, read back and written again on the cell's backend "
                                  "(caches flushed, as the peers do): device time from steps queued behind it, host "
                                  "time from as many steps "
                                  "started after it",
                                  e.flush_bytes >> 20)
                    : "",
      e.baseline, kBootstrapResamples);
  out += fmt::format(
      "- ceilings: copy {:.1f} GB/s (read + written), elementwise {:.1f} Gop/s, sgemm {:.1f} GFLOP/s ({}); {}\n",
      result.ceilings.copy_gb_s, result.ceilings.elementwise_gop_s, result.ceilings.gemm_gflop_s,
      result.ceilings.gemm_library, result.ceilings.method);
  if (probed_in_rounds(result)) out += fmt::format("- {}\n", kRoundsFloorNote);
  for (size_t b = 0; b < result.device_ceilings.size(); ++b)
    if (result.device_ceilings[b].measured())
      out += fmt::format(
          "- device ceilings of `{}`: copy {:.0f} GB/s, f32 GEMM {:.0f} GFLOP/s ({}); its cells are timed on the "
          "device (CUDA events) and their floors use these\n",
          e.backends[b].name, result.device_ceilings[b].copy_gb_s, result.device_ceilings[b].gemm_gflop_s,
          result.device_ceilings[b].method);
  out += fmt::format("- reference: `{}` with `{}`, rtol {}, atol {}{}{}\n", e.reference.backend, e.reference.pipeline,
                     e.reference.rtol, e.reference.atol, rtol_scope(e.reference.relative_to),
                     dtype_tolerances(e.reference.rtol, e.reference.atol));
  for (const PipelineEntry& p : e.pipelines) out += fmt::format("- pipeline `{}`: `{}`\n", p.name, p.text);
  for (const BackendEntry& b : e.backends)
    if (!b.options.empty() || !b.label.empty())
      out +=
          fmt::format("- backend {}: `{}` with options `{}`\n", b.label.empty() ? b.name : b.label, b.name, b.options);
  return out + "\n";
}

std::string markdown(const ExperimentResult& result, const RunInfo& info) {
  std::vector<const CellResult*> cells = all_cells(result), ran, refused;
  std::copy_if(cells.begin(), cells.end(), std::back_inserter(ran), [](const CellResult* c) { return c->ran(); });
  std::copy_if(cells.begin(), cells.end(), std::back_inserter(refused),
               [](const CellResult* c) { return !c->fusion_refusals.empty(); });
  std::string out = markdown_header(result, info);
  out += render_table(join_columns({&cell_identity_columns(), &cell_measure_columns(), &cell_outcome_columns()}), cells,
                      ReportFormat::Markdown);
  out +=
      "\n## Traffic and floor\n\nBytes moved: what the kernels read and write across their boundaries. Floor: "
      "the largest of the minimum bytes (inputs read once, outputs written once) at copy bandwidth, the matmul FLOPs "
      "at the sgemm rate, and the elementwise ops (the fewest any pipeline here needed) at the elementwise rate. "
      "A share of copy bandwidth above 100% means the step moved less through memory than its kernels' boundary "
      "traffic: data stayed resident in cache between kernels (or steps), which the floor does not assume.\n\n";
  out += render_table(join_columns({&cell_identity_columns(), &cell_traffic_columns()}), ran, ReportFormat::Markdown);
  out += captures_text(result, ReportFormat::Markdown);
  out += peers_text(result, ReportFormat::Markdown);
  if (!refused.empty())
    out +=
        "\n## Fusion refusals by reason\n\nPairs the fusion strategy declined, counted by reason code (`lazylab "
        "show --explain-fusion` lists each with its detail).\n\n" +
        render_table(refusal_columns(), refused, ReportFormat::Markdown);
  std::vector<PassRow> passes;
  for (const CellResult* c : cells)
    for (const PassStat& p : c->passes) passes.push_back({c, &p});
  std::vector<const PassRow*> pass_rows;
  for (const PassRow& row : passes) pass_rows.push_back(&row);
  out += "\n## Passes (cold compile)\n\n" + render_table(pass_columns(), pass_rows, ReportFormat::Markdown);
  return out + compile_notes_text(cells);
}

}  // namespace

std::string render_report(const LoadedReport& report, ReportFormat format) {
  ExperimentResult result = report.result();
  switch (format) {
    case ReportFormat::Console: return console(result);
    case ReportFormat::Markdown: return markdown(result, report.info);
    case ReportFormat::Html: return render_html(result, report.info);
    case ReportFormat::Csv:
      return render_table(join_columns({&cell_identity_columns(), &cell_measure_columns(), &cell_traffic_columns(),
                                        &cell_outcome_columns()}),
                          all_cells(result), ReportFormat::Csv);
  }
  return "";
}

Expected<ReportFormat> parse_report_format(const std::string& name) {
  if (name == "console") return ReportFormat::Console;
  if (name == "md" || name == "markdown") return ReportFormat::Markdown;
  if (name == "csv") return ReportFormat::Csv;
  if (name == "html") return ReportFormat::Html;
  return make_error(fmt::format("unknown report format '{}' (formats: console, md, csv, html)", name));
}

}  // namespace lazylab
