// Experiment reports. The JSON report (versioned schema,
// experiments/report.schema.json) is the one source: the console table,
// Markdown, CSV and HTML are rendered from it (read back, as `lazylab
// report` does), through the table descriptions in report_tables.h.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "report_table.h"
#include "runner.h"

namespace lazylab {

// 2: cell status and error, raw samples, medians and speedups with 95%
// intervals, ceilings' method.
// 3: the experiment's description and entries (workloads, pipelines,
// backends), so a report renders without its YAML file.
inline constexpr int kReportSchemaVersion = 3;
inline constexpr int kOldestReadableSchemaVersion = 2;

struct RunInfo {
  std::string started_at;  // ISO 8601, UTC
  std::string machine;     // CPU model, cores, memory, OS
  std::string build;       // lazylab version, git revision, compiler, build type
  std::vector<std::string> backend_devices;
  // A merged report's shards: "PATH: shard I/N on MACHINE, started AT".
  std::vector<std::string> merged_from;
  // Pass and strategy plugins loaded for the run: "NAME VERSION (PATH)".
  std::vector<std::string> plugins;
};

RunInfo collect_run_info(const std::vector<std::string>& backend_devices);
// The pass plugins loaded so far, as RunInfo::plugins spells them (the
// runner loads an experiment's plugins when it starts).
std::vector<std::string> plugin_descriptions();

nlohmann::json report_json(const ExperimentResult& result, const RunInfo& info);

// Where a run's reports go: the experiment's `report:` paths, or their file
// names in an output folder (-o DIR); without a `report:` key, every format
// as NAME.json, NAME.md, NAME.csv and NAME.html in DIR or in
// lazylab-reports/NAME-YYYYMMDD-HHMMSS. `partial` holds the cells finished
// so far while the run goes on (the JSON's path + ".partial"), for --resume.
struct ReportPaths {
  std::string json, markdown, csv, html, partial;
};

// Checked before anything runs: distinct paths, folders that can be created
// and written to.
Expected<ReportPaths> plan_reports(const Experiment& experiment, const std::string& output_dir);

// Writes `text` to a temporary file beside `path`, then renames it into
// place: a reader never sees half a report.
Status write_file_atomically(const std::string& path, const std::string& text);

// Writes the JSON report and the formats rendered from it, each atomically
// (temporary file + rename), and removes the partial results once the JSON
// report is in place.
Status write_reports(const nlohmann::json& report, const ReportPaths& paths, std::vector<std::string>& written);

// The cells finished so far, written atomically to `paths.partial`.
Status write_partial(const ExperimentResult& result, const RunInfo& info, const ReportPaths& paths);

// A report or partial results read back: its experiment hash, ceilings and
// cells.
struct LoadedReport {
  std::string path;
  std::string experiment_hash;
  std::string experiment_path;
  std::vector<KeyOverride> overrides;
  std::string shard;  // "I/N", or empty
  RunInfo info;
  std::vector<PeerResult> peers;
  std::vector<CaptureResult> captures;
  Ceilings ceilings;
  struct BackendCeilings {
    std::string backend, options;
    DeviceCeilings ceilings;
  };
  std::vector<BackendCeilings> device_ceilings;
  std::vector<CellResult> cells;
  // What the renderings read of the experiment: name, description, path,
  // hash, seed, repeats, baseline, reference and entries (schema 3; a
  // schema 2 report has no entries).
  Experiment experiment;
  bool isolated = false;

  // The run as the runner returned it, up to what the JSON does not keep.
  ExperimentResult result() const;
  // Its device ceilings by `experiment`'s backend entries, matched by name
  // and options (unmatched entries unmeasured).
  std::vector<DeviceCeilings> device_ceilings_for(const Experiment& experiment) const;
};
Expected<LoadedReport> load_report(const std::string& path);
// `path` names the report in errors.
Expected<LoadedReport> report_from_json(const nlohmann::json& report, const std::string& path);

// A report rendered for people (console, Markdown) or programs (CSV).
std::string render_report(const LoadedReport& report, ReportFormat format);
// "console", "md" or "markdown", "csv", "html".
Expected<ReportFormat> parse_report_format(const std::string& name);

}  // namespace lazylab
