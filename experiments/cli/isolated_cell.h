// --isolate: each cell runs in a child `lazylab run` that runs only it and
// writes its result as JSON; a crash there marks the cell, not the run.
#pragma once

#include <string>
#include <vector>

#include "runner/runner.h"

namespace lazylab::cli {

// How the child is asked for one cell: --cell W,B,P (entry indices).
std::string cell_argument(const CellIdentity& cell);
Expected<RunOptions::OnlyCell> parse_cell_argument(const std::string& text);

// Runs `cell` of the experiment at `experiment_path` (with its --set
// overrides) in a child process of this executable.
CellResult run_cell_in_child(const CellIdentity& cell, const std::string& experiment_path,
                             const std::vector<std::string>& sets);

}  // namespace lazylab::cli
