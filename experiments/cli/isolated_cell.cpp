#include "isolated_cell.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/pass_plugin.h"
#include "runner/child_process.h"
#include "runner/results_json.h"

namespace lazylab::cli {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::string cell_argument(const CellIdentity& cell) {
  return fmt::format("{},{},{}", cell.workload_entry, cell.backend_entry, cell.pipeline_entry);
}

Expected<RunOptions::OnlyCell> parse_cell_argument(const std::string& text) {
  RunOptions::OnlyCell cell;
  char comma1 = 0, comma2 = 0;
  std::istringstream in(text);
  if (!(in >> cell.workload >> comma1 >> cell.backend >> comma2 >> cell.pipeline) || comma1 != ',' || comma2 != ',')
    return make_error(fmt::format("--cell '{}': expected WORKLOAD,BACKEND,PIPELINE entry indices", text));
  return cell;
}

CellResult run_cell_in_child(const CellIdentity& cell, const std::string& experiment_path,
                             const std::vector<std::string>& sets) {
  std::error_code ec;
  fs::path scratch = fs::temp_directory_path(ec) / fmt::format("lazylab-cell-{}-{}", getpid(), cell_argument(cell));
  fs::create_directories(scratch, ec);
  if (ec)
    return CellResult::failure(CellStatus::Failed, fmt::format("cannot create {}: {}", scratch.string(), ec.message()));
  fs::path output = scratch / "cell.json", errors = scratch / "stderr.txt";
  std::vector<std::string> argv = {self_executable(),   "run",           experiment_path, "-q", "--cell",
                                   cell_argument(cell), "--cell-output", output.string()};
  for (const std::string& set : sets) argv.insert(argv.end(), {"--set", set});
  for (const LoadedPlugin& plugin : loaded_pass_plugins()) argv.insert(argv.end(), {"--load-plugin", plugin.path});
  ChildOptions options;
  options.stderr_file = errors.string();
  ChildOutcome outcome = run_child(argv, options);
  CellResult result;
  std::ifstream in(output);
  nlohmann::json json = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  auto parsed = json.is_object() ? cell_from_json(json) : Expected<CellResult>(make_error(""));
  if (outcome.signal)
    result = CellResult::failure(CellStatus::Crashed,
                                 fmt::format("crashed (signal {}: {}){}", outcome.signal, strsignal(outcome.signal),
                                             fs::file_size(errors, ec) ? ": " + last_lines(errors.string(), 3) : ""));
  else if (parsed)
    result = std::move(*parsed);
  else
    result = CellResult::failure(CellStatus::Failed,
                                 fmt::format("the isolated cell wrote no result ({}): {}", outcome.describe("lazylab"),
                                             last_lines(errors.string(), 3)));
  fs::remove_all(scratch, ec);
  return result;
}

}  // namespace lazylab::cli
