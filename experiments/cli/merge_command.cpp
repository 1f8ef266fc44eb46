#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "options.h"
#include "runner/merge.h"

namespace lazylab::cli {

int merge_command(const Args& args) {
  po::options_description options("lazylab merge options");
  std::vector<std::string> inputs;
  std::string output_dir, experiment_path;
  options.add_options()("reports", po::value(&inputs)->required(), "the shards' JSON reports")(
      "output-dir,o", po::value(&output_dir), "write the merged reports into this folder instead of the YAML's paths")(
      "experiment", po::value(&experiment_path), "the experiment file, where it is not where the shards ran it");
  po::positional_options_description positional;
  positional.add("reports", -1);
  po::variables_map vm;
  if (auto exit = parse_args(args, "usage: lazylab merge SHARD.json... [--output-dir DIR] [--experiment FILE.yaml]",
                             options, positional, vm))
    return *exit;
  auto fail = [](const std::string& message) {
    std::cerr << "lazylab: " << message << "\n";
    return kExitError;
  };
  std::vector<LoadedReport> shards;
  for (const std::string& path : inputs) {
    auto report = load_report(path);
    if (!report) return fail(report.error().message);
    shards.push_back(std::move(*report));
  }
  auto merged = merge_shards(shards, experiment_path);
  if (!merged) return fail(merged.error().message);
  auto paths = plan_reports(merged->result.experiment, output_dir);
  if (!paths) return fail(paths.error().message);
  paths->partial.clear();
  std::vector<std::string> written;
  nlohmann::json report = report_json(merged->result, merged->info);
  auto loaded = report_from_json(report, paths->json);
  if (!loaded) return fail(loaded.error().message);
  if (Status status = write_reports(report, *paths, written); !status) return fail(status.error().message);
  std::cout << render_report(*loaded, ReportFormat::Console);
  for (const std::string& path : written) std::cout << "wrote " << path << "\n";
  return kExitOk;
}

}  // namespace lazylab::cli
