#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend_probe.h"
#include "isolated_cell.h"
#include "options.h"
#include "runner/cell_filter.h"
#include "runner/report.h"
#include "runner/results_json.h"
#include "runner/runner.h"

namespace lazylab::cli {
namespace {

constexpr const char* kUsage =
    "usage: lazylab run EXPERIMENT.yaml [--output-dir DIR] [--set KEY=VALUE]... [--filter KEY=GLOB,...]...\n"
    "                   [--shard I/N] [--ceilings REPORT.json] [--resume]";

// --resume: the cells in the partial results of an interrupted run of the
// same experiment file, and its ceilings (so its floors stay comparable).
Status resume_from(const ReportPaths& paths, const Experiment& experiment, const std::string& output_dir,
                   RunOptions& options) {
  if (paths.partial.empty()) return make_error("--resume needs a JSON report path (report.json) to resume from");
  bool default_folder = experiment.report.json.empty() && experiment.report.markdown.empty() &&
                        experiment.report.csv.empty() && experiment.report.html.empty() && output_dir.empty();
  if (default_folder)
    return make_error(
        "--resume: this experiment has no report: key, so each run writes to a new lazylab-reports/NAME-TIME "
        "folder; give the interrupted run's folder with -o DIR");
  auto partial = load_report(paths.partial);
  if (!partial) return make_error(fmt::format("--resume: {}", partial.error().message));
  if (partial->experiment_hash != fmt::format("{:016x}", experiment.hash))
    return make_error(fmt::format("--resume: {} is from a different version of {} (hash {}, now {:016x})",
                                  paths.partial, experiment.path, partial->experiment_hash, experiment.hash));
  options.resumed = std::move(partial->cells);
  if (!options.pinned_ceilings) {
    options.pinned_ceilings = partial->ceilings;
    options.pinned_device_ceilings = partial->device_ceilings_for(experiment);
  }
  return {};
}

Status pin_ceilings(const std::string& path, const Experiment& experiment, RunOptions& options) {
  auto report = load_report(path);
  if (!report) return make_error(fmt::format("--ceilings: {}", report.error().message));
  options.pinned_ceilings = report->ceilings;
  options.pinned_ceilings->method = fmt::format("pinned from {} ({})", path, report->ceilings.method);
  options.pinned_device_ceilings = report->device_ceilings_for(experiment);
  for (DeviceCeilings& device : *options.pinned_device_ceilings)
    if (device.measured()) device.method = fmt::format("pinned from {} ({})", path, device.method);
  return {};
}

// The child's side of --isolate: one cell, its result as JSON, no reports.
int run_only_cell(const Experiment& experiment, const RunOptions& options, const std::string& output) {
  auto result = run_experiment(experiment, options);
  if (!result) {
    std::cerr << "lazylab: " << result.error().message << "\n";
    return kExitError;
  }
  if (result->cells.size() != 1) {
    std::cerr << "lazylab: --cell names no cell of this experiment\n";
    return kExitError;
  }
  std::ofstream out(output);
  out << cell_to_json(result->cells[0]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return out.flush() ? kExitOk : kExitError;
}

int exit_code_of(const ExperimentResult& result) {
  if (result.failed_cells() > 0) return kExitCellsFailed;
  if (!result.all_correct()) return kExitMismatch;
  return kExitOk;
}

}  // namespace

int run_command(const Args& args) {
  po::options_description options("lazylab run options");
  std::string experiment_path, output_dir, ceilings_path, shard, only_cell, cell_output;
  std::vector<std::string> sets, filters;
  options.add_options()("experiment", po::value(&experiment_path)->required(), "experiment YAML file")(
      "output-dir,o", po::value(&output_dir), "write the reports into this folder instead of the paths in the YAML")(
      "ceilings", po::value(&ceilings_path),
      "take the machine's ceilings from this earlier report instead of measuring them (floors then compare across "
      "runs)")("resume", "continue an interrupted run from its partial results (REPORT.json.partial)")(
      "set", po::value(&sets)->composing(),
      "override an experiment key: KEY is a dotted path with [i] for list items, VALUE is YAML (repeat.runs=3, "
      "workloads[0].params.rows=[64,128], backends=[cpu])")(
      "filter", po::value(&filters)->composing(),
      "run only the cells matching KEY=GLOB[,KEY=GLOB...] (keys: workload, pipeline, backend, label); several "
      "--filter run the cells any of them matches; the baselines of chosen cells run too")(
      "shard", po::value(&shard),
      "run the I-th of N shares of the cells (I/N; join the shards' reports with lazylab merge)")(
      "isolate",
      "load every backend, and run each cell, in a child process: a backend that crashes fails its cells instead "
      "of ending the run (cells then run one after another, not interleaved). Without it, this is done for the "
      "backend plugins lazylab does not ship, and the shipped ones run here")(
      "trust-plugins",
      "load every backend plugin in this process and interleave its cells too (a plugin that "
      "crashes then ends the run)")("cell", po::value(&only_cell), "(internal, for --isolate) run only the cell W,B,P")(
      "cell-output", po::value(&cell_output), "(internal, for --isolate) write that cell's result here")(
      "quiet,q", "no progress (by default: a live line on a terminal, a line per finished cell elsewhere)");
  po::positional_options_description positional;
  positional.add("experiment", 1);
  po::variables_map vm;
  if (auto exit = parse_args(args, kUsage, options, positional, vm)) return *exit;

  auto fail = [](const std::string& message) {
    std::cerr << "lazylab: " << message << "\n";
    return kExitError;
  };
  std::vector<KeyOverride> overrides;
  for (const std::string& text : sets) {
    auto parsed = parse_key_override(text);
    if (!parsed) return fail(parsed.error().message);
    overrides.push_back(*parsed);
  }
  auto filter = CellFilter::parse(filters);
  if (!filter) return fail(filter.error().message);
  auto experiment = load_experiment(experiment_path, overrides);
  if (!experiment) return fail(experiment.error().message);
  RunOptions run_options;
  Progress progress(std::cerr, stderr_is_terminal());
  if (!vm.count("quiet")) run_options.progress = &progress;
  if (!shard.empty()) {
    auto parsed = parse_shard(shard);
    if (!parsed) return fail(parsed.error().message);
    run_options.shard = *parsed;
  }
  if (vm.count("isolate") && vm.count("trust-plugins")) return fail("--isolate and --trust-plugins contradict");
  run_options.containment = vm.count("isolate")         ? Containment::All
                            : vm.count("trust-plugins") ? Containment::None
                                                        : Containment::ThirdParty;
  run_options.run_elsewhere = [&](const CellIdentity& cell) { return run_cell_in_child(cell, experiment_path, sets); };
  run_options.probe_elsewhere = probe_in_child;
  if (!only_cell.empty()) {
    auto parsed = parse_cell_argument(only_cell);
    if (!parsed) return fail(parsed.error().message);
    run_options.only_cell = *parsed;
    return run_only_cell(*experiment, run_options, cell_output);
  }
  auto paths = plan_reports(*experiment, output_dir);
  if (!paths) return fail(paths.error().message);
  if (!filter->empty()) run_options.select = [&](const CellIdentity& cell) { return filter->selects(cell); };
  if (!ceilings_path.empty())
    if (Status pinned = pin_ceilings(ceilings_path, *experiment, run_options); !pinned)
      return fail(pinned.error().message);
  if (vm.count("resume"))
    if (Status resumed = resume_from(*paths, *experiment, output_dir, run_options); !resumed)
      return fail(resumed.error().message);
  std::cerr << fmt::format("lazylab: running experiment '{}' ({} workloads x {} pipelines x {} backends{})\n",
                           experiment->name, experiment->workloads.size(), experiment->pipelines.size(),
                           experiment->backends.size(),
                           run_options.resumed.empty()
                               ? ""
                               : fmt::format(", {} cells resumed from {}", run_options.resumed.size(), paths->partial));
  RunInfo info = collect_run_info({});
  run_options.checkpoint = [&](const ExperimentResult& so_far) {
    info.plugins = plugin_descriptions();
    if (Status saved = write_partial(so_far, info, *paths); !saved)
      std::cerr << "lazylab: partial results not saved: " << saved.error().message << "\n";
  };
  auto result = run_experiment(*experiment, run_options);
  progress.finish();
  if (!result) return fail(result.error().message + "\nlazylab: no report written");
  if (result->cells.empty() && !filters.empty())
    return fail(
        fmt::format("no cell matches --filter {}\nlazylab: no report written", fmt::join(filters, " --filter ")));
  info.backend_devices = result->backend_devices;
  info.plugins = plugin_descriptions();
  nlohmann::json report = report_json(*result, info);
  auto loaded = report_from_json(report, paths->json);
  if (!loaded) return fail(loaded.error().message);
  std::cout << render_report(*loaded, ReportFormat::Console);
  std::vector<std::string> written;
  if (Status status = write_reports(report, *paths, written); !status) return fail(status.error().message);
  for (const std::string& path : written) std::cout << "wrote " << path << "\n";
  int exit_code = exit_code_of(*result);
  if (exit_code == kExitCellsFailed)
    std::cerr << fmt::format("lazylab: {} of {} cells failed (see the report)\n", result->failed_cells(),
                             result->cells.size());
  if (exit_code == kExitMismatch) std::cerr << "lazylab: some results do not match the reference (see the report)\n";
  return exit_code;
}

}  // namespace lazylab::cli
