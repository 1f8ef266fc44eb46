// Experiment reports: a console table, JSON (versioned schema) and Markdown,
// with machine and build info and the experiment's hash.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "runner.h"

namespace lazylab {

// 2: cell status and error, raw samples, medians and speedups with 95%
// intervals, ceilings' method.
inline constexpr int kReportSchemaVersion = 2;

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
std::string report_markdown(const ExperimentResult& result, const RunInfo& info);
std::string report_console(const ExperimentResult& result);

// Where a run's reports go: the experiment's paths, or their file names in
// an output folder. `partial` holds the cells finished so far while the run
// goes on (the JSON's path + ".partial"), for --resume.
struct ReportPaths {
  std::string json, markdown, partial;
};

// Checked before anything runs: distinct paths, folders that can be created
// and written to.
Expected<ReportPaths> plan_reports(const Experiment& experiment, const std::string& output_dir);

// Writes the reports, each atomically (temporary file + rename), and removes
// the partial results once the JSON report is in place.
Status write_reports(const ExperimentResult& result, const RunInfo& info, const ReportPaths& paths,
                     std::vector<std::string>& written);

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
  Ceilings ceilings;
  struct BackendCeilings {
    std::string backend, options;
    DeviceCeilings ceilings;
  };
  std::vector<BackendCeilings> device_ceilings;
  std::vector<CellResult> cells;

  // Its device ceilings by `experiment`'s backend entries, matched by name
  // and options (unmatched entries unmeasured).
  std::vector<DeviceCeilings> device_ceilings_for(const Experiment& experiment) const;
};
Expected<LoadedReport> load_report(const std::string& path);

}  // namespace lazylab
