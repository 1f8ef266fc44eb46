// The HTML report: one self-contained file (Chart.js inlined, no fetches)
// with a chart per workload of every cell's time with its 95% interval,
// the peers beside them and the floor as a line; the memory plan's peak
// against no reuse; a roofline per backend of a chosen cell's kernels; each
// cell's kernels (a table and the graph); and the tables of the other
// formats (report_tables.h).
#include <fmt/format.h>

#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "child_process.h"
#include "output_check.h"
#include "report.h"
#include "report_html.h"
#include "report_tables.h"

extern const char kChartJs[];  // generated from libjs-chart.js (experiments/meson.build)

namespace lazylab {
namespace {

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #1d1d1f; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 1em 0; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
dt { font-weight: 600; } dd { margin: 0; } code { font-size: 12px; }
.warning { background: #fff3cd; padding: .5em 1em; border-left: 4px solid #e0a800; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .3em; }
#errors { color: #b00020; }
)css";

// Draws each bar's 95% interval, records that a chart rendered (the browser
// test reads data-drawn), and shows script errors on the page.
constexpr const char* kScript = R"js(
const errors = document.getElementById('errors');
window.addEventListener('error', e => { errors.hidden = false; errors.textContent += e.message + '\n'; });
const data = JSON.parse(document.getElementById('report-data').textContent);
const intervalBars = { id: 'intervalBars', afterDatasetsDraw(chart) {
  const ctx = chart.ctx, y = chart.scales.y;
  chart.data.datasets.forEach((set, i) => {
    if (!set.intervals) return;
    ctx.save(); ctx.strokeStyle = '#222'; ctx.lineWidth = 1.2;
    chart.getDatasetMeta(i).data.forEach((bar, j) => {
      const range = set.intervals[j]; if (!range) return;
      const top = y.getPixelForValue(range[1]), bottom = y.getPixelForValue(range[0]);
      ctx.beginPath(); ctx.moveTo(bar.x, top); ctx.lineTo(bar.x, bottom);
      ctx.moveTo(bar.x - 4, top); ctx.lineTo(bar.x + 4, top);
      ctx.moveTo(bar.x - 4, bottom); ctx.lineTo(bar.x + 4, bottom); ctx.stroke();
    });
    ctx.restore();
  });
} };
const drawnMark = { id: 'drawnMark', afterRender(chart) { chart.canvas.dataset.drawn = 'true'; } };
function chart(id, config) {
  const canvas = document.getElementById(id);
  config.options = Object.assign({ animation: false, responsive: false }, config.options || {});
  config.plugins = [intervalBars, drawnMark];
  return new Chart(canvas, config);
}
// The roof under one flat ceiling: copy bandwidth times intensity up to the
// ridge point, the ceiling after it.
function roof(copy, ceiling, lo, hi) {
  return [lo, ceiling / copy, hi].filter(x => x >= lo && x <= hi).map(x => ({ x, y: Math.min(copy * x, ceiling) }));
}
function roofline(r, k) {
  const select = document.getElementById('roofline-select-' + k);
  let drawn = null;
  const draw = () => {
    const cell = r.cells[select.value];
    const xs = cell.points.map(p => p.x).concat(r.roofs.map(f => f.gop_s / r.copy_gb_s));
    const lo = Math.min(...xs) / 4, hi = Math.max(...xs) * 4;
    const roofs = r.copy_gb_s > 0 ? r.roofs.map((f, i) => ({ type: 'line', label: f.label,
        data: roof(r.copy_gb_s, f.gop_s, lo, hi), borderColor: ['#d9534f', '#e0a800'][i % 2], borderWidth: 2,
        pointRadius: 0, fill: false })) : [];
    if (drawn) drawn.destroy();
    drawn = chart('roofline-' + k, { type: 'scatter', data: { datasets: [
        { label: 'kernels of ' + cell.label, data: cell.points, backgroundColor: '#5b8def', pointRadius: 5 }]
        .concat(roofs) },
      options: { scales: {
          x: { type: 'logarithmic', title: { display: true, text: 'operations per byte (log)' } },
          y: { type: 'logarithmic', title: { display: true, text: 'Gop/s (log)' } } },
        plugins: { tooltip: { callbacks: { label: c => c.raw.label ? c.raw.label + ': ' + c.raw.detail
          : c.dataset.label } } } } });
  };
  select.addEventListener('change', draw);
  draw();
}
data.rooflines.forEach(roofline);
data.workloads.forEach((w, k) => {
  const bars = w.cells.concat(w.peers);
  chart('time-' + k, { type: 'bar', data: { labels: bars.map(b => b.label), datasets: [
      { label: 'median step, ms, with its 95% interval', data: bars.map(b => b.time),
        backgroundColor: bars.map(b => b.peer ? '#a0a0a0' : b.noisy ? '#f0b27a' : '#5b8def'),
        intervals: bars.map(b => [b.low, b.high]), order: 2 },
      { type: 'line', label: 'floor, ms', data: bars.map(b => b.floor), borderColor: '#d9534f',
        borderWidth: 3, pointRadius: 22, pointStyle: 'line', showLine: false, order: 1 }] },
    options: { scales: { y: { type: 'logarithmic', title: { display: true, text: 'ms per step (log)' } } },
      plugins: { tooltip: { callbacks: { afterLabel: c => bars[c.dataIndex].detail } } } } });
  chart('memory-' + k, { type: 'bar', data: { labels: w.cells.map(c => c.label), datasets: [
      { label: 'arena KiB, planned', data: w.cells.map(c => c.arena_kib), backgroundColor: '#5b8def' },
      { label: 'arena KiB, no reuse', data: w.cells.map(c => c.naive_kib), backgroundColor: '#c7c7c7' }] },
    options: { scales: { y: { beginAtZero: true, title: { display: true, text: 'KiB' } } } } });
});
)js";

// JSON inside <script>: "</" would end the element.
std::string script_safe(const std::string& json) {
  std::string out;
  for (size_t i = 0; i < json.size(); ++i) {
    out += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') out += '\\';
  }
  return out;
}

nlohmann::json cell_bar(const CellResult& c) {
  return {{"label", c.pipeline + " / " + c.backend_shown},
          {"time", c.time.value},
          {"low", c.time.low},
          {"high", c.time.high},
          {"floor", c.floor_ms > 0 ? nlohmann::json(c.floor_ms) : nlohmann::json()},
          {"noisy", c.noisy},
          {"peer", false},
          {"detail", fmt::format("{} kernels, {:.1f}% of floor, speedup {:.2f}x", c.kernels, 100 * c.floor_fraction,
                                 c.speedup.value)},
          {"arena_kib", static_cast<double>(c.arena_bytes) / 1024},
          {"naive_kib", static_cast<double>(c.naive_arena_bytes) / 1024}};
}

// One chart's data per workload as shown (an entry with its parameters); a
// peer's bar goes beside the cells it was compared with.
nlohmann::json chart_data(const ExperimentResult& result) {
  std::vector<std::string> order;
  std::map<std::string, nlohmann::json> groups;
  for (const CellResult& c : result.cells) {
    if (!groups.count(c.workload_shown)) {
      order.push_back(c.workload_shown);
      groups[c.workload_shown] = {
          {"name", c.workload_shown}, {"cells", nlohmann::json::array()}, {"peers", nlohmann::json::array()}};
    }
    if (c.ran()) groups[c.workload_shown]["cells"].push_back(cell_bar(c));
  }
  for (const PeerComparison& row : peer_comparisons(result)) {
    std::string shown = row.best ? row.best->workload_shown : row.peer_cell->workload;
    if (!groups.count(shown)) continue;
    // Bars share an axis with the cells' times (device time where they have
    // it), so a peer on the other clock says so.
    bool other_clock = row.best && row.best->timed_on_device() && !row.lazylab_on_device;
    groups[shown]["peers"].push_back({{"label", "peer " + row.peer->name + (other_clock ? " (host clock)" : "")},
                                      {"time", row.peer_cell->median_ms},
                                      {"low", row.peer_cell->min_ms},
                                      {"high", row.peer_cell->max_ms},
                                      {"floor", nullptr},
                                      {"peer", true},
                                      {"detail", "min to max of the peer's steps"}});
  }
  nlohmann::json workloads = nlohmann::json::array();
  for (const std::string& name : order) workloads.push_back(groups[name]);
  return {{"workloads", workloads}};
}

// A roofline per backend: each kernel of one of its cells (chosen on the
// page) that does arithmetic, at its intensity and achieved rate, under the
// backend's ceilings.
nlohmann::json roofline_cell(const ExperimentResult& result, const CellResult& c) {
  nlohmann::json points = nlohmann::json::array();
  size_t data_only = 0;
  std::set<std::string> kinds;  // of the kernels drawn, by their ops
  for (const KernelRow& row : kernel_rows(result, c)) {
    if (row.operations() <= 0 || row.bytes() <= 0 || row.seconds() <= 0) {
      ++data_only;
      continue;
    }
    if (row.kernel < c.kernel_labels.size()) kinds.insert(c.kernel_labels[row.kernel]);
    double gop_s = row.operations() / row.seconds() / 1e9;
    std::string label = fmt::format("k{}", row.kernel);
    if (row.kernel < c.kernel_labels.size()) label += " " + c.kernel_labels[row.kernel];
    points.push_back({{"x", row.operations() / row.bytes()},
                      {"y", gop_s},
                      {"label", label},
                      {"detail", fmt::format("{:.4f} ms, {:.3f} MB, {:.1f} GB/s, {:.2f} Gop/s", c.kernel_ms[row.kernel],
                                             row.bytes() / 1e6, row.bytes() / row.seconds() / 1e9, gop_s)}});
  }
  return {{"label", c.workload_shown + " / " + c.pipeline},
          {"points", points},
          {"data_only", data_only},
          {"kinds", kinds.size()}};
}

nlohmann::json roofline_data(const ExperimentResult& result) {
  nlohmann::json rooflines = nlohmann::json::array();
  for (size_t b = 0; b < result.experiment.backends.size(); ++b) {
    nlohmann::json cells = nlohmann::json::array();
    std::string shown;
    for (const CellResult& c : result.cells)
      if (c.backend_entry == b && c.ran() && !c.kernel_ms.empty()) {
        cells.push_back(roofline_cell(result, c));
        shown = c.backend_shown;
      }
    if (cells.empty()) continue;
    CellCeilings ceilings = ceilings_for(result, b);
    nlohmann::json roofs = nlohmann::json::array();
    if (ceilings.gemm_gflop_s > 0)
      roofs.push_back(
          {{"label", fmt::format("matmul {:.0f} GFLOP/s", ceilings.gemm_gflop_s)}, {"gop_s", ceilings.gemm_gflop_s}});
    if (ceilings.elementwise_gop_s > 0)
      roofs.push_back({{"label", fmt::format("elementwise {:.0f} Gop/s", ceilings.elementwise_gop_s)},
                       {"gop_s", ceilings.elementwise_gop_s}});
    rooflines.push_back({{"backend", shown},
                         {"copy_gb_s", ceilings.copy_gb_s},
                         {"device", ceilings.device},
                         {"roofs", roofs},
                         {"cells", cells}});
  }
  return rooflines;
}

std::string reproduce_command(const Experiment& e) {
  std::string command = "lazylab run " + e.path;
  for (const KeyOverride& o : e.overrides) command += fmt::format(" --set '{}={}'", o.key, o.value);
  return command;
}

std::string run_facts(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  std::string out = "<dl>\n";
  auto fact = [&](const std::string& name, const std::string& value) {
    out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", html_escape(name), value);
  };
  fact("reproduce", "<code>" + html_escape(reproduce_command(e)) + "</code>");
  fact("experiment",
       fmt::format("<code>{}</code>, hash <code>{:016x}</code>, seed {}", html_escape(e.path), e.hash, e.seed));
  fact("started", html_escape(info.started_at));
  fact("machine", html_escape(info.machine));
  fact("build", html_escape(info.build));
  for (const std::string& device : info.backend_devices) fact("device", html_escape(device));
  for (const std::string& plugin : info.plugins) fact("plugin", html_escape(plugin));
  fact("repeats",
       fmt::format("{} warm-up + {} timed steps after the cold step, then {} with each kernel timed; baseline "
                   "<code>{}</code>",
                   e.warmup, e.runs, e.profile_steps, html_escape(e.baseline)));
  fact("reference", fmt::format("<code>{}</code> with <code>{}</code>, rtol {}, atol {}{}{}",
                                html_escape(e.reference.backend), html_escape(e.reference.pipeline), e.reference.rtol,
                                e.reference.atol, html_escape(rtol_scope(e.reference.relative_to)),
                                html_escape(dtype_tolerances(e.reference.rtol, e.reference.atol))));
  fact("ceilings", html_escape(fmt::format("copy {:.1f} GB/s, elementwise {:.1f} Gop/s, sgemm {:.1f} GFLOP/s ({})",
                                           result.ceilings.copy_gb_s, result.ceilings.elementwise_gop_s,
                                           result.ceilings.gemm_gflop_s, result.ceilings.method)));
  for (const PipelineEntry& p : e.pipelines) fact("pipeline " + p.name, "<code>" + html_escape(p.text) + "</code>");
  return out + "</dl>\n";
}

// A heading, a sentence, and one canvas per workload (ids KIND-0, KIND-1...).
std::string chart_section(const nlohmann::json& data, const std::string& kind, const std::string& heading,
                          const std::string& intro, int height) {
  std::string out = fmt::format("<h2>{}</h2>\n<p>{}</p>\n<div class=\"charts\">\n", heading, intro);
  for (size_t k = 0; k < data["workloads"].size(); ++k)
    out += fmt::format(
        "<figure><figcaption>{}</figcaption><canvas id=\"{}-{}\" data-chart=\"{}\" width=\"560\" "
        "height=\"{}\"></canvas></figure>\n",
        html_escape(data["workloads"][k]["name"].get<std::string>()), kind, k, kind, height);
  return out + "</div>\n";
}

std::string charts(const nlohmann::json& data) {
  return chart_section(data, "time", "Time per step",
                       "Each cell's median step with its 95% bootstrap interval (orange: too noisy to rank), the "
                       "peers timed in the same run in grey, and each cell's floor as a red mark.",
                       320) +
         chart_section(data, "memory", "Memory plan",
                       "Peak arena bytes of the memory plan beside the same values without reuse.", 240);
}

std::string roofline_section(const nlohmann::json& rooflines) {
  if (rooflines.empty()) return "";
  std::string out =
      "<h2>Rooflines</h2>\n<p>Each kernel of the chosen cell that does arithmetic, at its intensity (operations: "
      "matmul "
      "FLOPs plus elementwise ops, per byte crossing the kernel's boundary) and its achieved rate, timed by the "
      "backend "
      "over the profiled steps; the roofs are the backend's measured ceilings: copy bandwidth (the slope) and the "
      "matmul and elementwise rates (flat). Kernels that only move data are in the kernel tables below.</p>\n"
      "<div class=\"charts\">\n";
  for (size_t k = 0; k < rooflines.size(); ++k) {
    const nlohmann::json& r = rooflines[k];
    std::string options;
    // Shown first: the cell with the most kinds of kernel to draw.
    size_t chosen = 0;
    for (size_t c = 0; c < r["cells"].size(); ++c)
      if (r["cells"][c]["kinds"].get<size_t>() > r["cells"][chosen]["kinds"].get<size_t>()) chosen = c;
    for (size_t c = 0; c < r["cells"].size(); ++c) {
      const nlohmann::json& cell = r["cells"][c];
      size_t data_only = cell["data_only"].get<size_t>();
      options += fmt::format("<option value=\"{}\"{}>{}{}</option>", c, c == chosen ? " selected" : "",
                             html_escape(cell["label"].get<std::string>()),
                             data_only ? fmt::format(" ({} data-only kernels not drawn)", data_only) : "");
    }
    out += fmt::format(
        "<figure><figcaption>{} ({} ceilings, copy {:.1f} GB/s) <select id=\"roofline-select-{}\">{}</select>"
        "</figcaption><canvas id=\"roofline-{}\" data-chart=\"roofline\" width=\"560\" height=\"360\"></canvas>"
        "</figure>\n",
        html_escape(r["backend"].get<std::string>()), r["device"].get<bool>() ? "device" : "host",
        r["copy_gb_s"].get<double>(), k, options, k);
  }
  return out + "</div>\n";
}

template <class Row>
std::string section(const std::string& title, const std::string& intro, const std::vector<ReportColumn<Row>>& columns,
                    const std::vector<const Row*>& rows) {
  if (rows.empty()) return "";
  return fmt::format("<h2>{}</h2>\n<p>{}</p>\n", html_escape(title), html_escape(intro)) +
         render_table(columns, rows, ReportFormat::Html);
}

std::string peers_section(const ExperimentResult& result) {
  if (result.peers.empty()) return "";
  std::string out = "<h2>Peers, measured in this run</h2>\n<ul>\n";
  for (const PeerResult& peer : result.peers)
    out += fmt::format(
        "<li><code>{}</code>: {}</li>\n", html_escape(peer.name),
        peer.error.empty() ? html_escape(peer.description) : "<strong>not run</strong>: " + html_escape(peer.error));
  std::vector<PeerComparison> rows = peer_comparisons(result);
  std::vector<const PeerComparison*> pointers;
  for (const PeerComparison& row : rows) pointers.push_back(&row);
  return out + "</ul>\n" + (pointers.empty() ? "" : render_table(peer_columns(), pointers, ReportFormat::Html));
}

// Graphviz's `dot` draws the kernel graph as inline SVG (each kernel's ops
// and bytes in its box and on hover); without Graphviz the DOT text shows.
std::string kernel_graph_svg(const std::string& dot_text, const std::string& scratch) {
  namespace fs = std::filesystem;
  std::string dot_path = scratch + ".dot", svg_path = scratch + ".svg";
  std::ofstream(dot_path) << dot_text;
  ChildOptions options;
  options.stdout_file = svg_path;
  options.stderr_file = scratch + ".err";
  options.timeout_s = 60;
  ChildOutcome drawn = run_child({"dot", "-Tsvg", dot_path}, options);
  std::stringstream svg;
  svg << std::ifstream(svg_path).rdbuf();
  std::error_code ec;
  for (const char* extension : {".dot", ".svg", ".err"}) fs::remove(scratch + extension, ec);
  std::string text = svg.str();
  size_t start = text.find("<svg");
  if (!drawn.succeeded() || start == std::string::npos)
    return "<p>Graphviz's <code>dot</code> could not draw it (" + html_escape(drawn.describe("dot")) +
           "; install graphviz); its DOT:</p>\n<pre>" + html_escape(dot_text) + "</pre>\n";
  return text.substr(start);
}

// The slowest kernels of a cell, with what the rest add up to.
constexpr size_t kKernelTableRows = 20;

std::string kernel_table(const ExperimentResult& result, const CellResult& c) {
  std::vector<KernelRow> rows = kernel_rows(result, c);
  if (rows.empty()) return "";
  std::vector<const KernelRow*> shown;
  double rest_ms = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (i < kKernelTableRows)
      shown.push_back(&rows[i]);
    else
      rest_ms += c.kernel_ms[rows[i].kernel];
  std::string out = render_table(kernel_columns(), shown, ReportFormat::Html);
  if (rows.size() > shown.size())
    out += fmt::format("<p>and {} more kernels, {:.4f} ms together.</p>\n", rows.size() - shown.size(), rest_ms);
  return out;
}

std::string kernel_details(const ExperimentResult& result) {
  std::string out;
  std::string scratch = (std::filesystem::temp_directory_path() / fmt::format("lazylab-graph-{}", ::getpid())).string();
  for (const CellResult& c : result.cells) {
    if (c.kernel_graph.empty() && c.kernel_ms.empty()) continue;
    double kernel_ms = 0;
    for (double ms : c.kernel_ms) kernel_ms += ms;
    out +=
        fmt::format("<details{}{}><summary>{} / {} / {}: {} kernels{}</summary>\n{}{}</details>\n",
                    c.kernel_graph.empty() ? "" : " data-kernel-graph", c.kernel_ms.empty() ? "" : " data-kernel-table",
                    html_escape(c.workload_shown), html_escape(c.pipeline), html_escape(c.backend_shown), c.kernels,
                    c.kernel_ms.empty() ? "" : fmt::format(", {:.4f} ms in kernels", kernel_ms),
                    kernel_table(result, c), c.kernel_graph.empty() ? "" : kernel_graph_svg(c.kernel_graph, scratch));
  }
  if (out.empty()) return "";
  return "<h2>Kernels after fusion</h2>\n<p>Each cell's kernels: the slowest first with their time (the median over "
         "the profiled steps, timed by the backend), the bytes they read and write, their rates and their share of the "
         "backend's copy ceiling; then the graph in execution order, with their ops and bytes (on hover too) and an "
         "edge where a kernel reads what another wrote. Programs of more than " +
         std::to_string(kKernelGraphLimit) + " kernels are not drawn.</p>\n" + out;
}

}  // namespace

std::string render_html(const ExperimentResult& result, const RunInfo& info) {
  const Experiment& e = result.experiment;
  std::vector<const CellResult*> cells, ran, refused;
  for (const CellResult& c : result.cells) {
    cells.push_back(&c);
    if (c.ran()) ran.push_back(&c);
    if (!c.fusion_refusals.empty()) refused.push_back(&c);
  }
  std::vector<PassRow> passes;
  for (const CellResult* c : cells)
    for (const PassStat& p : c->passes) passes.push_back({c, &p});
  std::vector<const PassRow*> pass_rows;
  for (const PassRow& row : passes) pass_rows.push_back(&row);
  nlohmann::json data = chart_data(result);
  data["rooflines"] = roofline_data(result);

  std::string out = fmt::format(
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>lazylab: {}</title>\n<style>{}"
      "</style>\n<script>{}</script>\n</head>\n<body>\n<pre id=\"errors\" hidden></pre>\n<h1>Experiment <code>{}</code>"
      "</h1>\n<p>{}</p>\n",
      html_escape(e.name), kStyle, kChartJs, html_escape(e.name), html_escape(e.description));
  if (std::string summary = outcome_summary(result); !summary.empty())
    out += "<p class=\"warning\">" + html_escape(summary) + "</p>\n";
  out += run_facts(result, info) + charts(data) + roofline_section(data["rooflines"]);
  out += section("Cells",
                 "time: the device time on a device backend, else the host step; n.s.: no significant "
                 "difference from the baseline (its 95% interval holds 1).",
                 join_columns({&cell_identity_columns(), &cell_measure_columns(), &cell_outcome_columns()}), cells);
  out += section("Traffic and floor",
                 "Bytes the kernels read and write across their boundaries, and the floor: minimum bytes at copy "
                 "bandwidth, matmul FLOPs at the sgemm rate or elementwise ops at the elementwise rate, the largest. " +
                     std::string(probed_in_rounds(result) ? kRoundsFloorNote : ""),
                 join_columns({&cell_identity_columns(), &cell_traffic_columns()}), ran);
  std::vector<CaptureRow> captures = capture_rows(result);
  std::vector<const CaptureRow*> capture_pointers;
  for (const CaptureRow& row : captures) capture_pointers.push_back(&row);
  out += section("PyTorch captures", kCaptureNote, capture_columns(), capture_pointers);
  out += peers_section(result);
  out += section("Fusion refusals by reason",
                 "Pairs the fusion strategy declined, counted by reason code (lazylab show --explain-fusion lists "
                 "each).",
                 refusal_columns(), refused);
  if (std::string lines = recompile_lines(result, ""); !lines.empty())
    out += "<h2>Recompilations</h2>\n<pre>" + html_escape(lines) + "</pre>\n";
  out += section("Passes (cold compile)", "Each pass's time and what it changed.", pass_columns(), pass_rows);
  out += kernel_details(result);
  out += "<script type=\"application/json\" id=\"report-data\">" + script_safe(data.dump()) + "</script>\n";
  out += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return out;
}

}  // namespace lazylab
