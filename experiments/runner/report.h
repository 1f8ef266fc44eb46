// Experiment reports: a console table, JSON (versioned schema) and Markdown,
// with machine and build info and the experiment's hash.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "runner.h"

namespace lazylab {

inline constexpr int kReportSchemaVersion = 1;

struct RunInfo {
  std::string started_at;  // ISO 8601, UTC
  std::string machine;     // CPU model, cores, memory, OS
  std::string build;       // lazylab version, git revision, compiler, build type
  std::vector<std::string> backend_devices;
};

RunInfo collect_run_info(const std::vector<std::string>& backend_devices);

nlohmann::json report_json(const ExperimentResult& result, const RunInfo& info);
std::string report_markdown(const ExperimentResult& result, const RunInfo& info);
std::string report_console(const ExperimentResult& result);

// Writes the configured reports, each atomically (temporary file + rename),
// into `output_dir` when set.
Status write_reports(const ExperimentResult& result, const RunInfo& info, const std::string& output_dir,
                     std::vector<std::string>& written);

}  // namespace lazylab
