#include <fmt/format.h>

#include <iostream>

#include "options.h"
#include "runner/report.h"
#include "runner/runner.h"

namespace lazylab::cli {

int run_command(const Args& args) {
  po::options_description options("lazylab run options");
  std::string experiment_path, output_dir;
  options.add_options()("experiment", po::value(&experiment_path)->required(), "experiment YAML file")(
      "output-dir,o", po::value(&output_dir), "write the reports into this folder instead of the paths in the YAML")(
      "quiet,q", "no per-cell progress");
  po::positional_options_description positional;
  positional.add("experiment", 1);
  po::variables_map vm;
  if (auto exit = parse_args(args, "usage: lazylab run EXPERIMENT.yaml [--output-dir DIR]", options, positional, vm))
    return *exit;

  auto experiment = load_experiment(experiment_path);
  if (!experiment) {
    std::cerr << "lazylab: " << experiment.error().message << "\n";
    return kExitError;
  }
  std::cerr << fmt::format("lazylab: running experiment '{}' ({} workloads x {} pipelines x {} backends)\n",
                           experiment->name, experiment->workloads.size(), experiment->pipelines.size(),
                           experiment->backends.size());
  auto result = run_experiment(*experiment, vm.count("quiet") ? nullptr : &std::cerr);
  if (!result) {
    std::cerr << "lazylab: " << result.error().message << "\nlazylab: no report written\n";
    return kExitError;
  }
  RunInfo info = collect_run_info(result->backend_devices);
  std::cout << report_console(*result);
  std::vector<std::string> written;
  Status status = write_reports(*result, info, output_dir, written);
  if (!status) {
    std::cerr << "lazylab: " << status.error().message << "\n";
    return kExitError;
  }
  for (const std::string& path : written) std::cout << "wrote " << path << "\n";
  if (!result->all_correct()) {
    std::cerr << "lazylab: some results do not match the reference (see the report)\n";
    return kExitMismatch;
  }
  return kExitOk;
}

}  // namespace lazylab::cli
