// The report's renderings from a fixed JSON report (tests/data): every
// format, a cell that failed, a peer that did not run, text that must be
// escaped; and the JSON round trip that makes the JSON the one source.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runner/report.h"
#include "runner/report_tables.h"
#include "runner/results_json.h"
#include "support.h"

using namespace lazylab;

namespace {

LoadedReport fixture() {
  auto report = load_report(LAZYLAB_REPORT_FIXTURE);
  REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message));
  return std::move(*report);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The lines of the Markdown table under `heading` (header and rule included).
std::vector<std::string> markdown_table_after(const std::string& markdown, const std::string& heading) {
  std::vector<std::string> table;
  bool inside = heading.empty();
  for (const std::string& line : lines_of(markdown)) {
    if (!inside) {
      inside = line == heading;
      continue;
    }
    if (line.starts_with("|"))
      table.push_back(line);
    else if (!table.empty())
      break;
  }
  return table;
}

}  // namespace

TEST_CASE("the console report has a row per cell, failures and peers that did not run") {
  std::string text = render_report(fixture(), ReportFormat::Console);
  std::vector<std::string> lines = lines_of(text);
  REQUIRE(lines.size() > 9);
  CHECK(lines[0].starts_with("workload"));
  CHECK(has(lines[0], "time ms [95% CI]"));
  CHECK(has(lines[0], "% of floor"));
  CHECK(lines[8].starts_with("layernorm"));
  CHECK(has(lines[8], "FAILED: step 1: execute: cpu: kernel 0 needs 64 MiB, over the arena limit"));
  CHECK(has(text, "WARNING: 1 of 8 cells failed"));
  CHECK(has(text, "peer jax: NOT RUN: exited with status 1: ModuleNotFoundError"));
  // 12.5 ms against the fastest correct softmax cell, fused / cpu.
  CHECK(has(text, "fused / cpu"));
  CHECK(has(text, "1.14x"));
}

TEST_CASE("the Markdown report's tables: every cell, the traffic of those that ran, escaped bars") {
  std::string text = render_report(fixture(), ReportFormat::Markdown);
  // Each backend as it described itself (the cuda backend's graph policy, say).
  CHECK(text.find("\n- backend interp: host CPU, reference loops (f64 accumulation)\n") != std::string::npos);
  CHECK(text.find("\n- backend cpu: host CPU, 2 threads (TBB), OpenBLAS") != std::string::npos);
  CHECK(text.starts_with("# Experiment `fixture`\n\nA fixed report for the rendering tests.\n"));
  CHECK(has(text, "- pipeline `fused`: `decompose,fuse{strategy=greedy-elementwise},lower`"));
  std::vector<std::string> cells = markdown_table_after(text,
                                                        "- pipeline `fused`: `decompose,fuse{strategy=greedy-"
                                                        "elementwise},lower`");
  REQUIRE(cells.size() == 2 + 8);
  CHECK(cells[1].starts_with("|---|---|---|---:|"));
  CHECK(cells[2].starts_with("| soft\\|max \"small\" | eager | interp | 7 |"));
  CHECK(has(cells[9], "| **no** |") == false);
  CHECK(has(cells[9], "FAILED: step 1"));
  std::vector<std::string> traffic = markdown_table_after(text, "## Traffic and floor");
  CHECK(traffic.size() == 2 + 7);  // the failed cell moved nothing
  CHECK(has(text, "- `jax`: **not run**: exited with status 1"));
  std::vector<std::string> passes = markdown_table_after(text, "## Passes (cold compile)");
  CHECK(passes.size() == 2 + 8 * 3);  // three passes in each cell's pipeline
  // What the first cell's backend decided at its compile, after a heading.
  CHECK(has(text,
            "\n## Backend decisions (cold compile)\n\nWhat each cell's backend chose while compiling, with the "
            "candidates it timed and where its code came from.\n\n- soft|max \"small\" / eager / interp:\n"
            "  - generated kernels: from the disk cache\n  - kernel 3: cuBLASLt 1 x [4 x 8] x [8 x 16]: candidate 2 "
            "of 3, 0.010 ms (timed at compile; all: 0.012 0.010 failed ms)\n"));
}

TEST_CASE("the CSV report is RFC 4180: a header, a row per cell, quoted fields") {
  std::vector<std::string> lines = lines_of(render_report(fixture(), ReportFormat::Csv));
  REQUIRE(lines.size() == 1 + 8);
  CHECK(lines[0].starts_with("workload,pipeline,backend,pipeline_text,status,kernels,"));
  CHECK(lines[0].ends_with(",correct,max_abs_error,max_rel_error,error\r"));
  CHECK(lines[1].starts_with("\"soft|max \"\"small\"\"\",eager,interp,\"decompose,fuse{strategy=none},lower\",ok,7,"));
  CHECK(lines[8].starts_with("layernorm,fused,cpu,\"decompose,fuse{strategy=greedy-elementwise},lower\",failed,,"));
  CHECK(lines[8].ends_with(",false,,,\"step 1: execute: cpu: kernel 0 needs 64 MiB, over the arena limit\"\r"));
}

TEST_CASE("rendering reads only the JSON: a report written again from its reading renders the same") {
  LoadedReport first = fixture();
  nlohmann::json again = report_json(first.result(), first.info);
  auto second = report_from_json(again, "again");
  REQUIRE(second.ok());
  for (ReportFormat format : {ReportFormat::Console, ReportFormat::Markdown, ReportFormat::Csv, ReportFormat::Html})
    CHECK(render_report(first, format) == render_report(*second, format));
  CHECK(again["experiment"]["entries"]["workloads"][0]["label"] == "soft|max \"small\"");
}

TEST_CASE("report formats and schema versions are checked") {
  CHECK(parse_report_format("md").ok());
  CHECK(parse_report_format("csv").ok());
  CHECK(parse_report_format("html").ok());
  auto html = parse_report_format("pdf");
  REQUIRE_FALSE(html.ok());
  CHECK(html.error().message == "unknown report format 'pdf' (formats: console, md, csv, html)");
  nlohmann::json future = {{"schema_version", kReportSchemaVersion + 1}};
  auto refused = report_from_json(future, "future.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(has(refused.error().message, "future.json: report schema version 4, this lazylab reads versions 2 to 3"));
  auto text_version = report_from_json(nlohmann::json{{"schema_version", "3"}}, "odd.json");
  REQUIRE_FALSE(text_version.ok());
  CHECK(has(text_version.error().message, "report schema version 0"));
}

TEST_CASE("a peer is compared with lazylab on its own clock: device time or the host's step") {
  LoadedReport report = fixture();
  // softmax fused / cpu becomes a cell timed on a device as well: 2 ms there,
  // 5 ms a step on the host; eager / cpu stays host-only at 18.2 ms.
  CellResult& device_cell = report.cells[3];
  device_cell.device_ceilings = true;
  device_cell.device_samples_ms = {2.0, 2.0, 2.0};
  device_cell.device_ms.median = 2.0;
  device_cell.step_ms.median = 5.0;
  PeerResult by_events{"gpu-peer", {}, "timed by device events", "", "", {{"softmax", 4.0, 3.0, 5.0, {}}}};
  by_events.clock = PeerClock::Device;
  PeerResult on_host{"host-peer", {}, "timed on the host", "", "", {{"softmax", 10.0, 9.0, 11.0, {}}}};
  report.peers = {by_events, on_host};
  ExperimentResult result = report.result();
  std::vector<PeerComparison> rows = peer_comparisons(result);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].best == &result.cells[3]);
  CHECK(rows[0].lazylab_ms == 2.0);
  CHECK(rows[0].lazylab_on_device);
  CHECK(rows[0].ratio() == doctest::Approx(2.0));
  CHECK(rows[1].best == &result.cells[3]);
  CHECK(rows[1].lazylab_ms == 5.0);  // its host step, not its device time
  CHECK_FALSE(rows[1].lazylab_on_device);
  CHECK(rows[1].ratio() == doctest::Approx(2.0));
  std::vector<std::string> table =
      markdown_table_after(render_report(report, ReportFormat::Markdown), "## Peers, measured in this run");
  REQUIRE(table.size() == 4);
  CHECK(table[0] == "| workload | peer | clock | peer ms | fastest lazylab | lazylab ms | peer / lazylab |");
  // The workload as its cells show it (the fixture's label, escaped).
  CHECK(table[2] == "| soft\\|max \"small\" | gpu-peer | device | 4.0000 | fused / cpu | 2.0000 | 2.00x |");
  CHECK(table[3] == "| soft\\|max \"small\" | host-peer | host | 10.0000 | fused / cpu | 5.0000 | 2.00x |");
}

TEST_CASE("a torch workload's capture is reported beside its fastest cell and survives the JSON") {
  LoadedReport report = fixture();
  // The fixture's softmax entry stands in for a program captured lazily: the
  // loop pays 1.5 ms a step on the host beside the graph.
  TorchCapture lazy{"lazy", 76, 1.5, true, 1.5, 0, 1e-7, 2.5e-7, 1e-4, 1e-3};
  report.captures = {{0, lazy}};
  ExperimentResult result = report.result();
  std::vector<CaptureRow> rows = capture_rows(result);
  REQUIRE(rows.size() == 1);
  REQUIRE(rows[0].best != nullptr);
  CHECK(rows[0].best->workload_entry == 0);
  for (const CellResult& c : result.cells)  // the fastest correct cell of the entry
    if (c.workload_entry == 0 && c.status == CellStatus::Ok) CHECK(rows[0].best->step_ms.median <= c.step_ms.median);
  CHECK(rows[0].step_with_host_ms() == doctest::Approx(rows[0].best->step_ms.median + 1.5));
  CHECK(lazy.us_per_aten_op() == doctest::Approx(1.5e3 / 76));
  std::string markdown = render_report(report, ReportFormat::Markdown);
  std::vector<std::string> table = markdown_table_after(markdown, "## PyTorch captures");
  REQUIRE(table.size() == 3);
  CHECK(has(table[0], "| workload | capture | graphs | aten ops/step | capture ms | paid |"));
  CHECK(has(table[2], "| lazy | 1 | 76 | 1.50 | each step | 19.7 | 0 | 1.0e-07 | 2.5e-07 |"));
  nlohmann::json again = report_json(result, report.info);
  CHECK(again["captures"][0]["workload_entry"] == 0);
  CHECK(again["captures"][0]["eager_check"]["state_tolerance"] == 1e-3);
  CHECK(again["captures"][0]["graphs"] == 1);
  auto read_back = report_from_json(again, "again");
  REQUIRE(read_back.ok());
  REQUIRE(read_back->captures.size() == 1);
  CHECK(render_report(*read_back, ReportFormat::Markdown) == markdown);
  // A record without its check is refused, naming the field.
  nlohmann::json broken = again;
  broken["captures"][0].erase("eager_check");
  auto refused = report_from_json(broken, "broken.json");
  REQUIRE_FALSE(refused.ok());
  CHECK(has(refused.error().message, "broken.json: a capture record is malformed"));
  CHECK(has(refused.error().message, "eager_check"));
  // A dynamo capture ran as several graphs, stitched into the one saved; a
  // record from before the count existed reads as one graph.
  TorchCapture dynamo{"dynamo", 90, 800, false, 2.0, 0, 1e-7, 2.5e-7, 1e-4, 1e-3, 3};
  report.captures = {{0, dynamo}};
  CHECK(has(markdown_table_after(render_report(report, ReportFormat::Markdown), "## PyTorch captures")[2],
            "| dynamo | 3 | 90 | 800.00 | once |"));
  nlohmann::json dynamo_json = report_json(report.result(), report.info);
  CHECK(report_from_json(dynamo_json, "d.json")->captures[0].capture.graphs == 3);
  dynamo_json["captures"][0].erase("graphs");
  CHECK(report_from_json(dynamo_json, "d.json")->captures[0].capture.graphs == 1);
}

// A column flagged hidden_when_blank leaves the tables people read where no
// row has a value, and stays in CSV; one value anywhere keeps it everywhere.
TEST_CASE("a column blank in every row is left out where it asks to be, but not from CSV") {
  struct Row {
    std::string probed;
  };
  std::vector<ReportColumn<Row>> columns = {
      {"name", "name", kEverywhere, false, [](const Row&) { return report_text("cell"); }},
      {"probed", "probed", kEverywhere, true, [](const Row& r) { return report_text(r.probed); }, true},
      {"kept", "kept", kEverywhere, true, [](const Row&) { return report_text(""); }},
  };
  Row blank{""}, measured{"81%"};
  std::vector<const Row*> none_probed = {&blank, &blank}, one_probed = {&blank, &measured};
  for (ReportFormat format : {ReportFormat::Console, ReportFormat::Markdown}) {
    CHECK_FALSE(has(render_table(columns, none_probed, format), "probed"));
    CHECK(has(render_table(columns, none_probed, format), "kept"));  // not flagged: kept though blank
    CHECK(has(render_table(columns, one_probed, format), "probed"));
    CHECK(has(render_table(columns, one_probed, format), "81%"));
  }
  CHECK(lines_of(render_table(columns, none_probed, ReportFormat::Csv)).front().starts_with("name,probed,kept"));
}

TEST_CASE("a cell's fields are described once: the writer, the reader and the schema agree") {
  std::vector<std::string> names = cell_field_names();
  std::set<std::string> fields(names.begin(), names.end());
  CHECK(fields.size() == names.size());  // no key twice
  std::ifstream in(LAZYLAB_REPORT_SCHEMA);
  nlohmann::json schema = nlohmann::json::parse(in);
  const nlohmann::json& cell = schema.at("$defs").at("cell");
  std::set<std::string> in_schema;
  for (const auto& [key, value] : cell.at("properties").items()) in_schema.insert(key);
  CHECK(in_schema == fields);
  for (const std::string& required : cell.at("required").get<std::vector<std::string>>())
    CHECK_MESSAGE(fields.count(required), required);
  // What the writer writes is what the list says, and reads back to the
  // same JSON.
  for (const CellResult& c : fixture().cells) {
    nlohmann::json written = cell_to_json(c);
    std::set<std::string> keys;
    for (const auto& [key, value] : written.items()) keys.insert(key);
    for (const std::string& key : keys) CHECK_MESSAGE(fields.count(key), key);
    auto read = cell_from_json(written);
    REQUIRE(read.ok());
    CHECK(cell_to_json(*read) == written);
  }
}
